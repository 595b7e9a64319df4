"""Memory plan vs measured peak resident memory (``planning.memory_plan``).

For each cell (model x ranks) it launches the real command and compares the plan's per-rank
peak with what the kernel reports:

* ``train``: ``mpirun -n P gnnscale train`` in memory (every rank loads the graph, rank 0
  partitions with METIS); measured: each rank's peak RSS (``ru_maxrss``) from the metrics
  summary; predicted: :func:`plan_memory` with the exact workload of the same partition.
* ``partition``: ``gnnscale partition --method M --parts P``; measured: the child's
  ``ru_maxrss`` (``os.wait4``); predicted: the plan in ``partition`` mode.

Every cell is appended to the output JSON (``--out``), so a sweep can be split into several
runs (hold the benchmark lock around each)::

    flock /tmp/gnnscale-bench.lock python benchmarks/memory_plan_validation.py \
        --cells train:gcn:1 train:gcn:2 train:gcn:4 partition:metis:4 \
        --out benchmarks/results/memory_plan_validation.json

``--allocator lean`` runs the train cells with ``GNNSCALE_RETAIN_MEMORY=0`` and compares with
the plan's lean figure; the default compares the trainer's own choice (freed pages kept) with
the plan's retained figure.

Graph: R-MAT scale 18 (``--scale``), 128 random features, 16 classes. GAT runs with 2 heads of
width 8 (``--gat-heads``, ``--gat-hidden``) so that its per-edge tensors fit this host.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gnnscale.cli.memory_check import layout_of  # noqa: E402
from gnnscale.data import load_dataset  # noqa: E402
from partitioning import make_partitioner  # noqa: E402
from planning.cost_model import ModelSpec  # noqa: E402
from planning.memory_plan import DatasetShape, balanced_workload, plan_memory  # noqa: E402
from planning.workload import part_workload  # noqa: E402


def env(allocator: str = "retain") -> dict:
    return {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMP_NUM_THREADS": "1", "PATH": f"{Path(sys.prefix) / 'bin'}:{os.environ['PATH']}",
            "GNNSCALE_RETAIN_MEMORY": "1" if allocator == "retain" else "0"}


def allocator_of(cell: dict) -> str:
    """The allocator mode a cell ran with (cells stored before the option: ``retain``)."""
    return cell.get("allocator", "retain")


def planned(plan: dict, allocator: str) -> list:
    """The plan's per-rank peak for the allocator the run used."""
    key = "per_rank_peak_retained" if allocator == "retain" else "per_rank_peak"
    return np.asarray(plan.get(key, plan["per_rank_peak"])).tolist()


def dataset_args(scale: int) -> list[str]:
    return ["--dataset", "rmat", "--data-root", str(REPO / "datasets"),
            "--dataset-option", f"scale={scale}",
            "--dataset-option", "num_features=128", "--dataset-option", "num_classes=16"]


def model_args(model: str, args) -> list[str]:
    if model == "gat":
        return ["--model", "gat", "--heads", str(args.gat_heads), "--hidden",
                str(args.gat_hidden)]
    return ["--model", model, "--hidden", str(args.hidden), "--layers", str(args.layers)]


def spec_of(model: str, data, args, cell: dict | None = None) -> ModelSpec:
    """The model of a cell: its own layers and width when given, else ``--layers``,
    ``--hidden``."""
    if model == "gat":
        return ModelSpec.build("gat", data.num_features, args.gat_hidden, data.num_classes,
                               heads=args.gat_heads)
    layers, hidden = (layers_of(cell), hidden_of(cell)) if cell else (args.layers, args.hidden)
    return ModelSpec.build(model, data.num_features, hidden, data.num_classes, layers=layers)


def hidden_of(cell: dict) -> int:
    """The hidden width a GCN/SAGE cell ran with (cells stored before the field: 64)."""
    return int(cell.get("hidden", 64))


def layers_of(cell: dict) -> int:
    """The layers a GCN/SAGE cell ran with (cells stored before the field: 2)."""
    return int(cell.get("layers", 2))


def train_cell(data, model: str, ranks: int, args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "m.jsonl"
        cmd = [str(Path(sys.prefix) / "bin" / "mpirun"), "-n", str(ranks), "--oversubscribe",
               sys.executable, "-m", "gnnscale", "train", *dataset_args(args.scale),
               *model_args(model, args), "--epochs", str(args.epochs), "--partitioner", "metis",
               "--no-progress", "--metrics-out", str(metrics), "--ignore-memory-plan"]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env(args.allocator),
                              cwd=REPO)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
        summary = json.loads(metrics.read_text().strip().splitlines()[-1])
    measured = [r["peak_rss_mb"] * 2**20 for r in summary["per_rank"]]
    shape = DatasetShape.of(data, layout_of("rmat"))
    if ranks > 1:
        partition = make_partitioner("metis", num_parts=ranks, seed=0).fit(data)
        work = part_workload(data, partition)
    else:
        work = balanced_workload(shape, 1)
    plan = plan_memory(shape, spec_of(model, data, args), work,
                       partition_method="metis" if ranks > 1 else None, mode="in-memory")
    return {"cell": f"train:{model}:{ranks}", "wall_s": time.perf_counter() - t0,
            "workload": _jsonable(work), "allocator": args.allocator, "hidden": args.hidden,
            "layers": args.layers,
            "measured_bytes": measured, "predicted_bytes": planned(plan, args.allocator),
            "predicted_phase": plan["per_rank_phase"]}


def partition_cell(data, method: str, parts: int, args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "gnnscale", "partition", *dataset_args(args.scale),
               "--method", method, "--parts", str(parts), "--out", str(Path(tmp) / "store"),
               "--ignore-memory-plan"]
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 env=env(), cwd=REPO)
        _, status, usage = os.wait4(child.pid, 0)
        if status != 0:
            raise RuntimeError(child.stderr.read().decode()[-2000:])
    shape = DatasetShape.of(data, layout_of("rmat"))
    work = part_workload(data, make_partitioner(method, num_parts=parts, seed=0).fit(data))
    plan = plan_memory(shape, spec_of("gcn", data, args), work, partition_method=method,
                       mode="partition")
    return {"cell": f"partition:{method}:{parts}", "wall_s": time.perf_counter() - t0,
            "workload": _jsonable(work),
            "measured_bytes": [usage.ru_maxrss * 1024.0],
            "predicted_bytes": plan["per_rank_peak"].tolist(),
            "predicted_phase": [plan["peak_phase"]]}


def _jsonable(work: dict) -> dict:
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in work.items()}


def predict_cell(cell: dict, data, args) -> None:
    """(Re)compute a cell's prediction with the current plan, from its stored workload (or,
    for a cell measured before workloads were stored, from the same partition again)."""
    kind, what, count = cell["cell"].split(":")
    count = int(count)
    shape = DatasetShape.of(data, layout_of("rmat"))
    if "workload" in cell:
        work = {k: np.asarray(v) if isinstance(v, list) else v
                for k, v in cell["workload"].items()}
    elif kind == "train" and count == 1:
        work = balanced_workload(shape, 1)
    else:
        method = "metis" if kind == "train" else what
        work = part_workload(data, make_partitioner(method, num_parts=count, seed=0).fit(data))
        cell["workload"] = _jsonable(work)
    if kind == "train":
        plan = plan_memory(shape, spec_of(what, data, args, cell), work,
                           partition_method="metis" if count > 1 else None, mode="in-memory")
    else:
        plan = plan_memory(shape, spec_of("gcn", data, args), work, partition_method=what,
                           mode="partition")
    cell["predicted_bytes"] = planned(plan, allocator_of(cell))
    cell["predicted_phase"] = plan["per_rank_phase"]
    cell["relative_error"] = [p / m - 1 for p, m in zip(cell["predicted_bytes"],
                                                          cell["measured_bytes"])]


def report(path) -> None:
    """Print the table of docs/planning.md (one row per cell: each rank's predicted / measured
    MiB, the errors, the phase the plan names for the largest rank) and the error summary of
    --out."""
    result = json.loads(Path(path).read_text())
    print("| cell | allocator | model | predicted / measured per rank (MiB) | error per rank "
          "| phase |")
    print("|---|---|---|---|---|---|")
    errors = {"lean": [], "retain": [], "partition": []}
    for c in sorted(result["cells"], key=lambda c: (c.get("scale", 18), c["cell"],
                                                     layers_of(c), hidden_of(c),
                                                     allocator_of(c))):
        train = c["cell"].startswith("train")
        model = (f"{layers_of(c)} x {hidden_of(c)}" if c["cell"].startswith(("train:gcn",
                                                                             "train:sage"))
                 else "2 heads x 8" if train else "")
        pairs = list(zip(c["predicted_bytes"], c["measured_bytes"]))
        cell_errors = [p / m - 1 for p, m in pairs]
        errors[allocator_of(c) if train else "partition"] += [abs(e) for e in cell_errors]
        largest = int(np.argmax(c["measured_bytes"]))
        print(f"| {c['cell']} (R-MAT {c.get('scale', 18)}) | "
              f"{allocator_of(c) if train else ''} | {model} | "
              + ", ".join(f"{p / 2**20:,.0f} / {m / 2**20:,.0f}" for p, m in pairs) + " | "
              + ", ".join(f"{100 * e:+.0f}%" for e in cell_errors)
              + f" | {c['predicted_phase'][largest]} |")
    every = [e for group in errors.values() for e in group]
    print(f"median absolute error {100 * np.median(every):.1f}%, largest "
          f"{100 * max(every):.1f}%, within 20%: {sum(e <= 0.2 for e in every)} of "
          f"{len(every)} rank peaks; " + ", ".join(
              f"{name} {sum(e <= 0.2 for e in group)} of {len(group)}"
              for name, group in errors.items() if group))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--report", action="store_true", help="print the table of --out")
    parser.add_argument("--repredict", action="store_true",
                        help="recompute every stored cell's prediction with the current plan")
    parser.add_argument("--cells", nargs="+", default=[],
                        help="train:MODEL:RANKS or partition:METHOD:PARTS")
    parser.add_argument("--scale", type=int, default=18)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--gat-hidden", type=int, default=8)
    parser.add_argument("--gat-heads", type=int, default=2)
    parser.add_argument("--allocator", choices=["retain", "lean"], default="retain",
                        help="train cells: the trainer keeps freed pages (retain, its default "
                             "when that fits) or returns them (lean, GNNSCALE_RETAIN_MEMORY=0); "
                             "compared with the plan's figure for the same choice")
    parser.add_argument("--out", default="benchmarks/results/memory_plan_validation.json")
    args = parser.parse_args()
    if args.report:
        return report(args.out)
    data = load_dataset("rmat", scale=args.scale, num_features=128, num_classes=16)
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {"cells": []}
    if args.repredict:
        for cell in results["cells"]:
            if cell.get("scale", 18) == args.scale:
                predict_cell(cell, data, args)
        out.write_text(json.dumps(results, indent=1))
        return report(out)
    results["graph"] = data.summary()
    for cell in args.cells:
        kind, what, count = cell.split(":")
        row = (train_cell if kind == "train" else partition_cell)(data, what, int(count), args)
        row["scale"] = args.scale
        errors = [p / m - 1 for p, m in zip(row["predicted_bytes"], row["measured_bytes"])]
        row["relative_error"] = errors
        print(f"{cell:<22} measured {np.round(np.array(row['measured_bytes']) / 2**20)} MiB "
              f"predicted {np.round(np.array(row['predicted_bytes']) / 2**20)} MiB "
              f"errors {np.round(errors, 3)} ({row['wall_s']:.0f} s)", flush=True)
        same = (cell, args.scale, allocator_of(row), layers_of(row), hidden_of(row))
        results["cells"] = [c for c in results["cells"] if (
            c["cell"], c.get("scale"), allocator_of(c), layers_of(c), hidden_of(c)) != same] \
            + [row]
        out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
