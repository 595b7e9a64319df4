"""Compare the memory plan with the memory this host has, before work that cannot fit starts.

``train`` and ``partition`` call one function each after loading (when the sizes are known).
The plan's peak for each rank, minus what the rank already holds, is summed over the ranks on
the same host (under ``mpirun`` they share its memory) and compared with what the host has
available (``MemAvailable``, bounded by the cgroup limit). Too much: a
:class:`~gnnscale.errors.UsageError` naming the phase and the figures, on every rank, unless
``--ignore-memory-plan`` is given.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from planning.memory_plan import format_bytes

from ..errors import UsageError
from ..host_memory import AVAILABLE_ENV, available_bytes  # noqa: F401  (AVAILABLE_ENV: tests)


def add_memory_plan_argument(parser) -> None:
    """``--ignore-memory-plan``."""
    parser.add_argument("--ignore-memory-plan", action="store_true",
                        help="go ahead even when the memory plan (see `gnnscale plan`) predicts "
                             "more than this host has available")


def current_rss_bytes() -> int:
    """This process's resident memory now."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def held_bytes(plan: dict, rank: int) -> float:
    """What this rank already holds, as far as the plan goes: its resident memory now, but no
    more than the plan's ``load`` phase when the plan has one (the data is loaded when the
    check runs). Capping by the plan keeps the predicted growth from vanishing when the runtime
    happens to be larger than the plan's estimate of it."""
    held = float(current_rss_bytes())
    load = plan["phases"].get("load")
    if load is not None:
        held = min(held, float(load[min(rank, len(load) - 1)]))
    return held


def check_plan(plan: dict, comm, what: str, ignore: bool = False) -> bool:
    """Collective: refuse (UsageError on every rank) if this host cannot hold ``plan``.

    ``plan``: from :func:`planning.memory_plan.plan_memory`, one entry per rank of
    ``comm`` (or one for a single process, ``comm=None``: not collective). Returns whether
    the host can also hold the plan's ``per_rank_peak_retained_bound`` (the allocator keeping
    freed pages for faster steps, at the largest growth measured); the same answer on every
    rank of a host.
    """
    rank = comm.rank if comm is not None and len(plan["per_rank_peak"]) > 1 else 0
    held = held_bytes(plan, rank)
    need = max(0.0, float(plan["per_rank_peak"][rank]) - held)
    retained = plan.get("per_rank_peak_retained_bound",
                        plan.get("per_rank_peak_retained", plan["per_rank_peak"]))
    need_retained = max(need, float(retained[rank]) - held)
    mine = (socket.gethostname(), need, need_retained, rank)
    everyone = comm.allgather_object(mine) if comm is not None and comm.size > 1 else [mine]
    host = mine[0]
    on_host = [(n, nr, r) for h, n, nr, r in everyone if h == host]
    host_need = sum(n for n, _, _ in on_host)
    available = available_bytes()
    retain_fits = sum(nr for _, nr, _ in on_host) <= available
    if ignore or host_need <= available:
        return retain_fits
    peak_rank = max(on_host)[2]
    phases = {k: float(v[min(peak_rank, len(v) - 1)]) for k, v in plan["phases"].items()}
    phase = max(phases, key=phases.get)
    raise UsageError(
        f"{what} would not fit in memory: the plan's peak is {format_bytes(phases[phase])} per rank "
        f"in phase {phase!r} (rank {peak_rank}); the {len(on_host)} rank(s) on {host} need "
        f"{format_bytes(host_need)} more but {format_bytes(available)} is available (see `gnnscale plan`; "
        f"--ignore-memory-plan to go ahead)")


#: models the plan has no entry for, planned as the closest one it has (same tensors kept)
CLOSEST_MODEL = {"gatv2": "gat", "gin": "sage", "sage-max": "sage", "graphconv": "sage"}


#: the options of ``--model`` and its shape that the plan reads (:func:`model_options`)
MODEL_OPTIONS = ("model", "layers", "hidden", "heads", "out_heads", "dropout")


def model_options(args) -> dict:
    """The :data:`MODEL_OPTIONS` that parsed options hold, as the plan functions take them."""
    return {name: getattr(args, name) for name in MODEL_OPTIONS if hasattr(args, name)}


def model_spec_of(model: dict, features: int, classes: int):
    """The plan's :class:`~planning.cost_model.ModelSpec` of ``model`` (:func:`model_options`;
    a model the plan does not know is planned as :data:`CLOSEST_MODEL` says)."""
    from planning.cost_model import ModelSpec

    shape = {k: model[k] for k in ("heads", "out_heads", "dropout") if k in model}
    return ModelSpec.build(CLOSEST_MODEL.get(model["model"], model["model"]),
                           max(int(features), 1), model["hidden"], max(int(classes), 1),
                           model["layers"], **shape)


def layout_of(dataset: str, data_root: str | None = None) -> str:
    """The input layout (a key of :data:`planning.memory_plan.LOADING`) of a dataset name
    or path, as the loaders read it."""
    from planning.memory_plan import LOADING

    from ..data.converted import is_converted
    from ..data.load import GENERATED

    name = str(dataset).lower()
    if name in GENERATED:
        return "generated"
    path = Path(dataset)
    for folder in (path, Path(data_root or ".") / str(dataset)):
        if folder.is_dir() and is_converted(folder):
            return "converted"
    text = list(path.rglob("*.txt*")) if path.is_dir() else [path] if ".txt" in name else []
    if "snap" in name or text:
        return "edge-list"
    return "arrays" if "arrays" in LOADING else next(iter(LOADING))


def check_training(comm, data, *, layout: str, model: dict, method: str,
                   ignore: bool = False) -> bool:
    """``train`` without a store: every rank holds ``data`` (read in ``layout``, see
    :func:`layout_of`); rank 0 partitions it with ``method``; ``model``: see
    :func:`model_options`. Returns whether the retained heap fits too (:func:`check_plan`)."""
    from planning.memory_plan import DatasetShape, balanced_workload, plan_memory

    shape = DatasetShape.of(data, layout)
    plan = plan_memory(shape, model_spec_of(model, data.num_features, data.num_classes),
                       balanced_workload(shape, comm.size),
                       partition_method=method if comm.size > 1 else None, mode="in-memory")
    return check_plan(plan, comm, f"training on {comm.size} rank(s)", ignore)


def check_store_training(comm, store_dir, *, model: dict, ignore: bool = False) -> bool:
    """``train --partitions``: each rank reads its own part; sizes come from the manifest.
    Returns whether the retained heap fits too (:func:`check_plan`)."""
    plan = plan_for_store(store_dir, comm.size, model)
    return check_plan(plan, comm, f"training from {store_dir}", ignore)


def plan_for_store(store_dir, ranks: int, model: dict) -> dict:
    """Memory plan of training ``model`` (:func:`model_options`) from a partition store on
    ``ranks`` ranks (its manifest's per-part sizes)."""
    import numpy as np

    from planning.memory_plan import DatasetShape, balanced_workload, plan_memory
    from partitioning.store import read_manifest

    manifest = read_manifest(store_dir)
    graph = manifest["graph"]
    extra = manifest.get("extra") or {}
    row_shape = (manifest.get("data") or {}).get("x", {}).get("row_shape") or [1]
    features = int(np.prod(row_shape))
    classes = int(extra.get("num_classes") or 2)
    shape = DatasetShape(int(graph["num_nodes"]), int(graph["num_edges"]), features, classes)
    work = balanced_workload(shape, ranks)
    summary = manifest.get("summary") or {}
    if len(summary.get("nodes", [])) == ranks:  # the store's exact per-part sizes
        halo = np.asarray(summary.get("halo_nodes", np.zeros(ranks)), float)
        work["nodes"] = np.asarray(summary["nodes"], float)
        work["inner_edges"] = np.asarray(summary["edges"], float)
        work["boundary_edges"] = np.zeros(ranks)
        work["recv_rows"] = np.diag(halo) if ranks == 1 else \
            np.outer(halo, np.ones(ranks)) * (1 - np.eye(ranks)) / (ranks - 1)
    return plan_memory(shape, model_spec_of(model, features, classes), work, mode="store")


def check_partitioning(data, *, parts: int, method: str, layout: str,
                       ignore: bool = False) -> None:
    """``gnnscale partition``: one process partitions ``data`` (read in ``layout``) into
    ``parts`` with ``method`` and writes the store."""
    from planning.cost_model import ModelSpec
    from planning.memory_plan import DatasetShape, balanced_workload, plan_memory

    shape = DatasetShape.of(data, layout)
    spec = ModelSpec.build("gcn", shape.num_features, 16, shape.num_classes)
    plan = plan_memory(shape, spec, balanced_workload(shape, min(parts, shape.num_nodes)),
                       partition_method=method, mode="partition")
    check_plan(plan, None, f"partitioning into {parts} parts", ignore)
