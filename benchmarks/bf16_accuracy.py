"""What bf16 compute costs in accuracy: the same training in float32 and in bf16, seed by seed.

Run from the repository root with the project's venv (one process; minutes):

    .venv/bin/python benchmarks/bf16_accuracy.py

Each (dataset, model, seed) trains twice from the same initial weights and dropout seed:
``Trainer(compute_dtype=None)`` (float32) and ``Trainer(compute_dtype=torch.bfloat16)`` (the
transforms under bf16 autocast; rows dropped out, aggregated and exchanged in bf16 where the
layer aggregates at half width; float32 sums, weights, optimiser and loss). 2 layers of
``--hidden`` (256: wide enough that the bf16 rows go through the half-width kernel), dropout
0.5, Adam (lr 0.01, weight decay 5e-4), ``--epochs`` epochs with evaluation each; the reported
figure is the test metric at the epoch of the best validation metric (accuracy on Cora and
CiteSeer, ROC AUC on Tolokers, as their benchmarks report them). Datasets from ``datasets/``
(``GNNSCALE_DATA_ROOT`` overrides). Writes ``benchmarks/results/bf16_accuracy.json`` and prints
one row per (dataset, model): mean and standard deviation over seeds for each precision, and
the mean and largest per-seed difference (bf16 - float32).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from gnnscale.comm import SingleCommunicator
from gnnscale.data import load_dataset
from gnnscale.engine import LocalProblem, Trainer
from gnnscale.nn import GNN

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("GNNSCALE_DATA_ROOT") or REPO / "datasets")
METRIC = {"cora": "acc", "citeseer": "acc", "tolokers": "auc"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", nargs="+", default=list(METRIC), choices=list(METRIC))
    p.add_argument("--models", nargs="+", default=["gcn", "sage"], choices=["gcn", "sage"])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=str(REPO / "benchmarks/results/bf16_accuracy.json"))
    return p.parse_args(argv)


def best_val_test(data, metric: str, model: str, seed: int, compute_dtype, args) -> dict:
    """Train once; the test ``metric`` at the best validation epoch."""
    comm = SingleCommunicator()
    problem = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64), comm)
    torch.manual_seed(seed)
    net = GNN(model, data.num_features, args.hidden, data.num_classes, num_layers=2,
              dropout=0.5)
    trainer = Trainer(net, problem, comm, lr=0.01, weight_decay=5e-4, seed=seed,
                      metrics=(metric,), compute_dtype=compute_dtype)
    t = time.perf_counter()
    records = trainer.fit(args.epochs)
    best = max(records, key=lambda r: r.metrics[f"val_{metric}"])
    return {"val": best.metrics[f"val_{metric}"], "test": best.metrics[f"test_{metric}"],
            "epoch": best.epoch, "seconds": time.perf_counter() - t}


def summarise(runs: dict) -> dict:
    tests = {p: [r["test"] for r in runs[p]] for p in runs}
    diffs = [h - f for h, f in zip(tests["bfloat16"], tests["float32"])]
    return {p: {"mean": statistics.mean(v), "std": statistics.pstdev(v)}
            for p, v in tests.items()} | {
        "difference_mean": statistics.mean(diffs),
        "difference_largest": max(diffs, key=abs)}


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    report = {"benchmark": "bf16_accuracy", "hidden": args.hidden, "layers": 2,
              "dropout": 0.5, "epochs": args.epochs, "seeds": args.seeds,
              "optimizer": "Adam lr=0.01 weight_decay=5e-4", "torch": torch.__version__,
              "results": {}}
    for name in args.datasets:
        data = load_dataset(name, root=DATA_ROOT)
        for model in args.models:
            runs = {"float32": [], "bfloat16": []}
            for seed in range(args.seeds):
                for precision, dtype in (("float32", None), ("bfloat16", torch.bfloat16)):
                    runs[precision].append(
                        best_val_test(data, METRIC[name], model, seed, dtype, args))
                print(f"{name} {model} seed {seed}: test float32 "
                      f"{runs['float32'][-1]['test']:.4f}, bf16 "
                      f"{runs['bfloat16'][-1]['test']:.4f}", flush=True)
            entry = {"metric": METRIC[name], "runs": runs, "summary": summarise(runs)}
            report["results"][f"{name}/{model}"] = entry
    Path(args.out).write_text(json.dumps(report, indent=2))
    print("\n| dataset | model | metric | float32 | bf16 | bf16 - float32: mean, largest |")
    print("|---|---|---|---|---|---|")
    for key, entry in report["results"].items():
        s = entry["summary"]
        dataset, model = key.split("/")
        print(f"| {dataset} | {model} | test {entry['metric']} | "
              f"{s['float32']['mean']:.4f} ± {s['float32']['std']:.4f} | "
              f"{s['bfloat16']['mean']:.4f} ± {s['bfloat16']['std']:.4f} | "
              f"{s['difference_mean']:+.4f}, {s['difference_largest']:+.4f} |")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
