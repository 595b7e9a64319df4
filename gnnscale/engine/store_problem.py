"""This rank's problem from a partition store written by ``gnnscale partition``: read its part
(:func:`read_store_part`), then build a :class:`LocalProblem` on a ``LocalGraph`` for an edge-cut
store or on a ``VertexCutGraph`` for a vertex-cut one (:func:`problem_from_store_part`)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch

from partitioning.local_view import PartView
from partitioning.store import part_file_name, read_manifest, read_part

from ..comm import Communicator
from ..errors import UsageError
from .local_problem import SPLITS, LocalProblem
from .vertex_cut_problem import vertex_cut_problem_from_arrays, vertex_cut_store_view


def problem_from_store(store_dir, comm: Communicator, dtype=torch.float32,
                       device="cpu") -> LocalProblem:
    """Read only this rank's part of a partition store written by ``gnnscale partition``.

    Collective: every rank must call it. Reading happens first and touches no collective,
    so a caller may wrap :func:`read_store_part` in an agreement block of its own.
    """
    return problem_from_store_part(read_store_part(store_dir, comm.rank, comm.size), comm,
                                   dtype=dtype, device=device)


def problem_from_store_part(part: "StorePart", comm: Communicator, dtype=torch.float32,
                            device="cpu") -> LocalProblem:
    """Build from arrays :func:`read_store_part` returned (collective): a ``LocalGraph``
    for an edge-cut part, a ``VertexCutGraph`` for a vertex-cut part."""
    num_classes = part.num_classes
    if num_classes is None:
        local_max = float(part.y.max()) if part.y.size else -1.0
        num_classes = int(comm.allreduce_scalar(local_max, "max")) + 1
    if part.kind == "vertex_cut":
        return vertex_cut_problem_from_arrays(part.view, part.x, part.y, part.masks, comm,
                                              num_classes, dtype=dtype, device=device)
    return LocalProblem.from_part_arrays(part.view, part.x, part.y, part.masks, comm,
                                         num_classes, dtype=dtype, device=device)


@dataclass
class StorePart:
    """One rank's arrays from a partition store, before any collective set-up.

    ``view`` is a :class:`PartView` for an edge cut and the dict of vertex-cut arrays
    (:data:`~gnnscale.engine.vertex_cut_problem.VERTEX_CUT_FIELDS`) for a vertex cut; ``x``,
    ``y`` and ``masks`` hold the owned (master) rows in both cases.
    """

    view: "PartView | dict"
    x: np.ndarray
    y: np.ndarray
    masks: dict
    num_classes: int | None
    manifest: dict
    kind: str = "edge_cut"


STORE_KINDS = ("edge_cut", "vertex_cut")


def read_store_part(store_dir, rank: int, num_ranks: int) -> StorePart:
    """Read and check ``rank``'s part of the store (local: no communication)."""
    manifest = read_manifest(store_dir)
    kind = manifest["partition"]["kind"]
    if kind not in STORE_KINDS:
        raise UsageError(f"partition store {store_dir} holds a {kind!r} partition; training "
                         f"reads {' and '.join(STORE_KINDS)} stores (re-create it with "
                         f"`gnnscale partition`)")
    arrays = read_part(store_dir, rank, expected_num_parts=num_ranks)
    missing = [s for s in ("x", "y", *(f"mask_{s}" for s in SPLITS)) if s not in arrays]
    if missing:
        raise UsageError(f"partition store {store_dir} has no {', '.join(missing)} for its "
                         f"nodes; write it from a dataset with features, labels and masks")
    x = arrays["x"]
    if kind == "vertex_cut":
        where = f"{store_dir}/{part_file_name(rank)}"
        view, x = vertex_cut_store_view(arrays, where)
    else:
        view_fields = {f.name for f in fields(PartView)} - {"part", "num_parts",
                                                            "num_global_nodes"}
        view = PartView(part=rank, num_parts=num_ranks,
                        num_global_nodes=int(manifest["graph"]["num_nodes"]),
                        **{name: arrays[name] for name in view_fields})
    return StorePart(view=view, x=x, y=arrays["y"],
                     masks={s: arrays[f"mask_{s}"] for s in SPLITS},
                     num_classes=(manifest.get("extra") or {}).get("num_classes"),
                     manifest=manifest, kind=kind)
