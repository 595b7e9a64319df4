"""What quantized halo exchange costs in accuracy: the same training with halo rows (and halo
gradients) on the wire as float32, int8, int4 and int2, seed by seed.

Run from the repository root under the benchmark lock, one launch per (dataset, rank count)
(``--oversubscribe`` for more ranks than cores; ``--allow-run-as-root`` as root)::

    flock /tmp/gnnscale-bench.lock mpirun --oversubscribe -n 4 .venv/bin/python \\
        benchmarks/quantized_halo_accuracy.py --datasets tolokers

Each dataset is partitioned once with METIS (seed 0) into one part per rank; every (model,
seed) then trains once per wire format from the same initial weights and dropout seed, so the
differences against float32 are paired. The hyperparameters are the project's recipes for
these datasets (:data:`RECIPES`): on Cora and CiteSeer Kipf and Welling's GCN (16 units,
dropout 0.5, Adam lr 0.01, weight decay 5e-4; SAGE the same) and Velickovic et al.'s GAT
(8 heads of 8 units, dropout and attention dropout 0.6, ELU, lr 0.005); on Tolokers and
Minesweeper the SAGE recipe of the quality bars (64 units, dropout 0.2, lr 0.01, no weight
decay; GCN the same, GAT 8 heads of 8 units); 2 layers; :data:`EPOCHS` epochs (Cora, CiteSeer
and Tolokers 100, Minesweeper 200). Every epoch is
evaluated; a run's figure is the test metric at the epoch of the best validation metric
(accuracy on Cora and CiteSeer, ROC AUC on the binary Tolokers and Minesweeper).

The wire formats are ``HaloPlan.configure(message_dtype=..., gradient_dtype=...)``:
``float32``, ``int8``, ``int4`` and ``int2`` as ``--halo-dtype`` sends them (gradients at the
rows' width), and for the choice of the gradients' width ``int4/g-int8`` and ``int2/g-int8``
(int8 gradients under narrower rows). Halo bytes are those of one training step, summed over
the ranks. Datasets from ``datasets/`` (``GNNSCALE_DATA_ROOT`` overrides).

The results file (``--out``) holds every finished run under ``runs`` keyed
``dataset/ranks/model/format/seed``; each run is added as it finishes (the file is replaced
atomically), and a launch skips the runs the file already holds, so a cut-off launch resumes
where it stopped. ``table`` summarises each (dataset, ranks, model, format) over the seeds
present for it and for float32: mean and standard deviation of the test metric, the mean and
the worst per-seed difference against float32 (points: metric x 100), and whether the mean
difference meets the goal of its width (``GOALS``). ``--summary`` prints the table of a
results file without training (``--markdown``: as the docs show it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("GNNSCALE_DATA_ROOT") or REPO / "datasets")
DEFAULT_OUT = REPO / "benchmarks/results/quantized_halo_accuracy_table.json"
#: name -> (message bits, gradient bits); None: float32
FORMATS = {
    "float32": (None, None),
    "int8": (8, 8),
    "int4": (4, 4),
    "int2": (2, 2),
    "int4/g-int8": (4, 8),
    "int2/g-int8": (2, 8),
}
#: the mean loss against float32 (points) each width is held to; int2 has none
GOALS = {"int8": 0.3, "int4": 1.0}
METRIC = {"cora": "acc", "citeseer": "acc", "tolokers": "auc", "minesweeper": "auc"}
#: epochs per dataset
EPOCHS = {"cora": 100, "citeseer": 100, "tolokers": 100, "minesweeper": 200}
_CITATION = {
    "gcn": (dict(hidden_dim=16, dropout=0.5), dict(lr=0.01, weight_decay=5e-4)),
    "sage": (dict(hidden_dim=16, dropout=0.5), dict(lr=0.01, weight_decay=5e-4)),
    "gat": (dict(hidden_dim=8, heads=8, out_heads=1, dropout=0.6, attn_dropout=0.6,
                 activation="elu"), dict(lr=0.005, weight_decay=5e-4)),
}
_HETEROPHILOUS = {
    "gcn": (dict(hidden_dim=64, dropout=0.2), dict(lr=0.01, weight_decay=0.0)),
    "sage": (dict(hidden_dim=64, dropout=0.2), dict(lr=0.01, weight_decay=0.0)),
    "gat": (dict(hidden_dim=8, heads=8, out_heads=1, dropout=0.2), dict(lr=0.01,
                                                                         weight_decay=0.0)),
}
#: (dataset, model) -> (GNN keyword arguments, Trainer keyword arguments)
RECIPES = {(d, m): r for d in ("cora", "citeseer") for m, r in _CITATION.items()} | {
    (d, m): r for d in ("tolokers", "minesweeper") for m, r in _HETEROPHILOUS.items()}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", nargs="+", default=list(METRIC), choices=list(METRIC))
    p.add_argument("--models", nargs="+", default=["gcn", "sage", "gat"],
                   choices=["gcn", "sage", "gat"])
    p.add_argument("--formats", nargs="+", default=["float32", "int8", "int4", "int2"],
                   choices=list(FORMATS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    p.add_argument("--epochs", type=int, default=None,
                   help="epochs of every dataset (default: EPOCHS per dataset)")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--summary", action="store_true",
                   help="print the table of --out and exit (no training, no MPI)")
    p.add_argument("--markdown", action="store_true",
                   help="with --summary: the table as markdown, one row per model")
    return p.parse_args(argv)


def run_key(dataset: str, ranks: int, model: str, wire: str, seed: int) -> str:
    return f"{dataset}/{ranks}/{model}/{wire}/{seed}"


def wire_of(bits):
    from gnnscale.graph.quantize import QuantizedWire

    return None if bits is None else QuantizedWire(bits)


def best_val_test(problem, comm, data, dataset: str, model: str, seed: int, wire: str,
                  epochs: int) -> dict:
    """Train once; the test metric at the best validation epoch, and the halo bytes."""
    from gnnscale.engine import Trainer
    from gnnscale.nn import GNN

    message, gradient = FORMATS[wire]
    problem.graph.halo_plan.configure(message_dtype=wire_of(message),
                                      gradient_dtype=wire_of(gradient), quantize_seed=seed)
    model_kw, optim_kw = RECIPES[(dataset, model)]
    metric = METRIC[dataset]
    torch.manual_seed(seed)
    net = GNN(model, data.num_features, out_dim=data.num_classes, num_layers=2, **model_kw)
    trainer = Trainer(net, problem, comm, seed=seed, metrics=(metric,), **optim_kw)
    start = time.perf_counter()
    best_val, best_epoch, test, halo_bytes = -1.0, 0, 0.0, 0
    for _ in range(epochs):
        record = trainer.run_epoch()
        halo_bytes = record.halo_bytes_sent
        if record.metrics[f"val_{metric}"] > best_val:
            best_val, best_epoch = record.metrics[f"val_{metric}"], record.epoch
            test = record.metrics[f"test_{metric}"]
    total = int(comm.allreduce(torch.tensor([halo_bytes], dtype=torch.float64)))
    return {"val": float(best_val), "test": float(test), "epoch": int(best_epoch),
            "epochs": epochs,
            "halo_bytes_per_step": total, "seconds": time.perf_counter() - start}


def load_results(path: Path) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    return {"metric": METRIC, "goals_points": GOALS, "runs": {}}


def save_results(path: Path, results: dict) -> None:
    """Replace ``path`` atomically with ``results`` and its table."""
    results["table"] = summarise(results["runs"])
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n")
    tmp.replace(path)


def summarise(runs: dict) -> dict:
    """(dataset, ranks, model, format) -> mean/std of the test metric over its seeds, and for
    the seeds float32 has too the paired difference (points) and whether it meets the goal."""
    groups: dict[str, dict[int, dict]] = {}
    for key, run in runs.items():
        cell, seed = key.rsplit("/", 1)
        groups.setdefault(cell, {})[int(seed)] = run
    table = {}
    for cell, by_seed in sorted(groups.items()):
        dataset, ranks, model, wire = cell.split("/", 3)
        tests = [by_seed[s]["test"] for s in sorted(by_seed)]
        row = {"seeds": len(tests), "test_mean": statistics.mean(tests),
               "test_std": statistics.pstdev(tests),
               "halo_bytes_per_step": next(iter(by_seed.values()))["halo_bytes_per_step"]}
        base = groups.get(f"{dataset}/{ranks}/{model}/float32", {})
        paired = [s for s in sorted(by_seed) if s in base]
        if wire != "float32" and paired:
            diffs = [100 * (by_seed[s]["test"] - base[s]["test"]) for s in paired]
            row |= {"paired_seeds": len(paired), "diff_points_mean": statistics.mean(diffs),
                    "diff_points_worst": min(diffs)}
            goal = GOALS.get(wire)
            if goal is not None:
                row["goal_points"] = goal
                row["meets_goal"] = bool(row["diff_points_mean"] >= -goal)
        table[cell] = row
    return table


def print_table(table: dict) -> None:
    for cell, row in table.items():
        diff = ""
        if "diff_points_mean" in row:
            diff = (f"  diff {row['diff_points_mean']:+6.2f} (worst "
                    f"{row['diff_points_worst']:+6.2f}, {row['paired_seeds']} seeds)")
            if "meets_goal" in row:
                diff += "  meets" if row["meets_goal"] else "  MISSES"
        print(f"{cell:32s} {100 * row['test_mean']:6.2f} +- {100 * row['test_std']:4.2f}"
              f"{diff}  halo bytes/step {row['halo_bytes_per_step']}", flush=True)


def markdown(table: dict, formats=("int8", "int4", "int2")) -> str:
    """The table as markdown: a row per (dataset, ranks, model), float32's mean +- std over
    its seeds, then per format the mean difference to float32 in points, the worst seed's in
    parentheses, and whether the mean meets the format's goal (yes/no; int2 has none)."""
    names = {"cora": "Cora", "citeseer": "CiteSeer", "tolokers": "Tolokers",
             "minesweeper": "Minesweeper"}
    lines = ["| dataset (metric) | ranks | model | seeds | float32 | "
             + " | ".join(formats) + " |", "|---" * (5 + len(formats)) + "|"]
    cells = {}
    for cell in table:
        dataset, ranks, model, _ = cell.split("/", 3)
        cells.setdefault((dataset, int(ranks), model), None)
    order = {d: i for i, d in enumerate(METRIC)}
    models = {m: i for i, m in enumerate(("gcn", "sage", "gat"))}
    for dataset, ranks, model in sorted(cells, key=lambda k: (order[k[0]], k[1],
                                                             models.get(k[2], 9))):
        base = table.get(f"{dataset}/{ranks}/{model}/float32")
        if base is None:
            continue
        row = [f"{names[dataset]} ({METRIC[dataset]})", str(ranks), model.upper(),
               str(base["seeds"]),
               f"{100 * base['test_mean']:.2f} +- {100 * base['test_std']:.2f}"]
        for wire in formats:
            got = table.get(f"{dataset}/{ranks}/{model}/{wire}")
            if got is None or "diff_points_mean" not in got:
                row.append("")
                continue
            text = f"{got['diff_points_mean']:+.2f} ({got['diff_points_worst']:+.2f})"
            if got["paired_seeds"] != base["seeds"]:
                text += f" [{got['paired_seeds']} seeds]"
            if "meets_goal" in got:
                text += " yes" if got["meets_goal"] else " **no**"
            row.append(text)
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    args = parse_args(argv)
    out = Path(args.out)
    if args.summary:
        if not out.exists():
            print(f"quantized_halo_accuracy: no results file {str(out)!r}", file=sys.stderr)
            raise SystemExit(2)
        table = summarise(json.loads(out.read_text())["runs"])
        if args.markdown:
            print(markdown(table))
        else:
            print_table(table)
        return
    from gnnscale.comm import init
    from gnnscale.data import load_dataset
    from gnnscale.engine import LocalProblem
    from partitioning import make_partitioner

    comm = init()
    torch.set_num_threads(1)
    results = load_results(out)
    comm.barrier()  # every rank has read the file before rank 0 writes it
    for dataset in args.datasets:
        epochs = args.epochs or EPOCHS[dataset]
        todo = [(seed, model, wire) for seed in args.seeds for model in args.models
                for wire in args.formats
                if run_key(dataset, comm.size, model, wire, seed) not in results["runs"]]
        if not todo:
            continue
        data = load_dataset(dataset, root=DATA_ROOT)
        parts = make_partitioner("metis", num_parts=comm.size, seed=0).fit(data).node_parts
        problem = LocalProblem.from_graph_data(data, parts, comm)
        for seed, model, wire in todo:
            run = best_val_test(problem, comm, data, dataset, model, seed, wire, epochs)
            key = run_key(dataset, comm.size, model, wire, seed)
            if comm.rank == 0:
                results["runs"][key] = run
                save_results(out, results)
                print(f"{key}: test {run['test']:.4f} at epoch {run['epoch']}, "
                      f"{run['seconds']:.1f} s", flush=True)
    if comm.rank == 0:
        print_table(summarise(results["runs"]))


if __name__ == "__main__":
    main()
