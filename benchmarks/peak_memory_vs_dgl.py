"""Peak resident memory of one-process full-batch training: gnnscale against DGL, each run in
its own process on the same converted graph.

Run from the repository root (the DGL environment comes from `make dgl-env`)::

    .venv/bin/gnnscale convert --dataset rmat --dataset-option scale=18 \\
        --dataset-option num_features=128 --dataset-option num_classes=16 --out /tmp/rmat18-128
    flock /tmp/gnnscale-bench.lock .venv/bin/python benchmarks/peak_memory_vs_dgl.py \\
        --dataset /tmp/rmat18-128

Workload (the README's engine tables): R-MAT scale 18 (262,144 nodes, 7.6M edges), 128
features, 16 classes, GCN and SAGE with 2 layers of 256, Adam, 2 threads, dropout 0.5 and 0.
Runs, in turn, per model and dropout:
  gnnscale          ``gnnscale train`` (``--epochs``, evaluation every epoch), the trainer's
                    own allocator choice (freed memory kept for reuse when the plan says it fits)
  gnnscale lean     the same with ``GNNSCALE_RETAIN_MEMORY=0`` (freed memory returned)
  dgl               ``benchmarks/large_graph_peer.py --library dgl`` (DGL 2.1.0 GraphConv /
                    SAGEConv, ``--steps`` steps and one evaluation pass) as installed
  dgl tuned         the same with gnnscale's allocator setting (``GLIBC_TUNABLES`` below)
Measured: each process's peak RSS (``ru_maxrss``), which includes loading the graph. Writes
``--out`` and prints a table (MiB, and the ratio to DGL as installed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from large_graphs import GLIBC_TUNABLES, dgl_python

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ("gnnscale", "gnnscale lean", "dgl", "dgl tuned")


def gnnscale_peak(args, model: str, dropout: float, lean: bool) -> float:
    """Peak RSS (MiB) of ``gnnscale train`` in one process."""
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    env.pop("GNNSCALE_RETAIN_MEMORY", None)
    if lean:
        env["GNNSCALE_RETAIN_MEMORY"] = "0"
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "metrics.jsonl"
        subprocess.run([str(Path(sys.prefix) / "bin" / "gnnscale"), "train", "--dataset",
                        args.dataset, "--model", model, "--layers", "2", "--hidden",
                        str(args.hidden), "--dropout", str(dropout), "--epochs",
                        str(args.epochs), "--threads", str(args.threads), "--no-progress",
                        "--metrics-out", str(metrics)], env=env, cwd=REPO, check=True,
                       capture_output=True, text=True)
        summary = json.loads(metrics.read_text().strip().splitlines()[-1])
    return float(summary["per_rank"][0]["peak_rss_mb"])


def dgl_peak(args, python: str, model: str, dropout: float, tuned: bool) -> float:
    """Peak RSS (MiB) of DGL training in one process (``large_graph_peer.py`` run by the DGL
    environment's ``python``)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if tuned:
        env["GLIBC_TUNABLES"] = GLIBC_TUNABLES
    done = subprocess.run([python, "benchmarks/large_graph_peer.py", "--library", "dgl",
                           "--model", model, "--dataset", args.dataset, "--layers", "2",
                           "--hidden", str(args.hidden), "--dropout", str(dropout),
                           "--steps", str(args.epochs - 1), "--threads", str(args.threads)],
                          env=env, cwd=REPO, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["peak_rss_bytes"] / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, help="converted graph folder")
    parser.add_argument("--models", nargs="+", default=["gcn", "sage"])
    parser.add_argument("--dropouts", nargs="+", type=float, default=[0.5, 0.0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/peak_memory_vs_dgl.json"))
    args = parser.parse_args()
    rows, python = [], dgl_python()
    for model in args.models:
        for dropout in args.dropouts:
            peaks = {"gnnscale": gnnscale_peak(args, model, dropout, lean=False),
                     "gnnscale lean": gnnscale_peak(args, model, dropout, lean=True),
                     "dgl": dgl_peak(args, python, model, dropout, tuned=False),
                     "dgl tuned": dgl_peak(args, python, model, dropout, tuned=True)}
            rows.append({"model": model, "dropout": dropout, "peak_rss_mib": peaks})
            print(f"{model} dropout {dropout}: " + ", ".join(
                f"{k} {v:,.0f} MiB ({v / peaks['dgl']:.2f}x)" for k, v in peaks.items()),
                flush=True)
    Path(args.out).write_text(json.dumps({"dataset": args.dataset, "hidden": args.hidden,
                                          "epochs": args.epochs, "threads": args.threads,
                                          "rows": rows}, indent=1))
    print("| model | dropout | " + " | ".join(VARIANTS) + " |")
    print("|---|---|" + "---|" * len(VARIANTS))
    for row in rows:
        peaks = row["peak_rss_mib"]
        print(f"| {row['model'].upper()} | {row['dropout']} | " + " | ".join(
            f"{peaks[k]:,.0f} MiB ({peaks[k] / peaks['dgl']:.2f}x)" for k in VARIANTS) + " |")


if __name__ == "__main__":
    main()
