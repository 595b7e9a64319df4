"""Peak resident memory of one-process full-batch training: gnnscale against DGL, each run in
its own process on the same converted graph.

Run from the repository root (the DGL environment comes from `make dgl-env`)::

    .venv/bin/gnnscale convert --dataset rmat --dataset-option scale=18 \\
        --dataset-option num_features=128 --dataset-option num_classes=16 --out /tmp/rmat18-128
    flock /tmp/gnnscale-bench.lock .venv/bin/python benchmarks/peak_memory_vs_dgl.py \\
        --dataset /tmp/rmat18-128

Workload (docs/performance.md): R-MAT scale 18 (262,144 nodes, 7.6M edges), 128
features, 16 classes, GCN and SAGE with 2 layers of 256, Adam, 2 threads, dropout 0.5 and 0.
Runs, in turn, per model and dropout:
  gnnscale          ``gnnscale train`` (``--epochs``, evaluation every epoch), the trainer's
                    own allocator choice (freed memory kept for reuse when the plan says it fits)
  gnnscale lean     the same with ``GNNSCALE_RETAIN_MEMORY=0`` (freed memory returned)
  gnnscale kept     the same with ``GNNSCALE_RETAIN_MEMORY=1`` (freed memory kept even where
                    the memory plan's bound for a kept heap exceeds the available memory;
                    not run unless asked for)
  gnnscale bf16     the first with ``--compute-dtype bfloat16``
  dgl               ``benchmarks/large_graph_peer.py --library dgl`` (DGL 2.1.0 GraphConv /
                    SAGEConv, ``--epochs - 1`` steps and one evaluation pass) as installed
  dgl tuned         the same with gnnscale's allocator setting (``GLIBC_TUNABLES`` below)
  dgl bf16          as installed, ``--compute-dtype bfloat16`` (bf16 autocast)
A variant whose process fails (e.g. killed at a memory limit the whole run is put under) is
recorded as failed with its exit status. Measured: each process's peak RSS (``ru_maxrss``),
which includes loading the graph, and its
median training step (gnnscale: epoch minus evaluation, epochs after the first two; DGL: the
steps after the first). One process per variant, in turn (not alternating step by step as
``engine_vs_dgl.py`` does), so the times carry the host's drift between processes. Writes
``--out`` and prints two tables (peak MiB, and seconds per step, each with the ratio to DGL as
installed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from large_graphs import GLIBC_TUNABLES, dgl_python

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ("gnnscale", "gnnscale lean", "gnnscale kept", "gnnscale bf16", "dgl", "dgl tuned",
            "dgl bf16")
#: the variants run without --variants
DEFAULT_VARIANTS = tuple(v for v in VARIANTS if v != "gnnscale kept")


def gnnscale_run(args, model: str, dropout: float, bf16: bool,
                 retain_memory: str | None = None) -> tuple:
    """(peak RSS MiB, median training step s) of ``gnnscale train`` in one process;
    ``retain_memory``: ``GNNSCALE_RETAIN_MEMORY`` ("0": freed memory returned, "1": kept
    whatever the memory plan says; None: the trainer's choice)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    env.pop("GNNSCALE_RETAIN_MEMORY", None)
    if retain_memory is not None:
        env["GNNSCALE_RETAIN_MEMORY"] = retain_memory
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "metrics.jsonl"
        subprocess.run([str(Path(sys.prefix) / "bin" / "gnnscale"), "train", "--dataset",
                        args.dataset, "--model", model, "--layers", "2", "--hidden",
                        str(args.hidden), "--dropout", str(dropout), "--epochs",
                        str(args.epochs), "--threads", str(args.threads), "--no-progress",
                        "--compute-dtype", "bfloat16" if bf16 else "float32",
                        "--metrics-out", str(metrics)], env=env, cwd=REPO, check=True,
                       capture_output=True, text=True)
        records = [json.loads(line) for line in metrics.read_text().strip().splitlines()]
    steps = [r["epoch_time_s"] - r["time"]["eval_s"] for r in records
             if not r.get("summary")][2:]
    return float(records[-1]["per_rank"][0]["peak_rss_mb"]), statistics.median(steps)


def dgl_run(args, python: str, model: str, dropout: float, tuned: bool, bf16: bool) -> tuple:
    """(peak RSS MiB, median training step s) of DGL training in one process
    (``large_graph_peer.py`` run by the DGL environment's ``python``)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if tuned:
        env["GLIBC_TUNABLES"] = GLIBC_TUNABLES
    done = subprocess.run([python, "benchmarks/large_graph_peer.py", "--library", "dgl",
                           "--model", model, "--dataset", args.dataset, "--layers", "2",
                           "--hidden", str(args.hidden), "--dropout", str(dropout),
                           "--steps", str(args.epochs - 1), "--threads", str(args.threads),
                           "--compute-dtype", "bfloat16" if bf16 else "float32"],
                          env=env, cwd=REPO, check=True, capture_output=True, text=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["peak_rss_bytes"] / 2**20, result["step_s_median"]


def print_table(rows: list, key: str, fmt, variants: list) -> None:
    variants = [v for v in VARIANTS if v in variants]
    print("| model | dropout | " + " | ".join(variants) + " |")
    print("|---|---|" + "---|" * len(variants))
    for row in rows:
        values = row[key]
        print(f"| {row['model'].upper()} | {row['dropout']} | " + " | ".join(
            f"{fmt(values[k])} ({values[k] / values['dgl']:.2f}x)" if k in values
            else "failed" if k in row.get("failed", {}) else "-"
            for k in variants) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, help="converted graph folder")
    parser.add_argument("--models", nargs="+", default=["gcn", "sage"])
    parser.add_argument("--dropouts", nargs="+", type=float, default=[0.5, 0.0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS),
                        choices=VARIANTS, help="which runs (default all but 'gnnscale kept'; "
                        "ratios need dgl)")
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/peak_memory_vs_dgl.json"))
    args = parser.parse_args()
    if "dgl" not in args.variants:
        parser.error("--variants must include dgl (every ratio is to DGL as installed)")
    rows, python = [], dgl_python()
    for model in args.models:
        for dropout in args.dropouts:
            runners = {
                "gnnscale": lambda: gnnscale_run(args, model, dropout, bf16=False),
                "gnnscale lean": lambda: gnnscale_run(args, model, dropout, bf16=False,
                                                      retain_memory="0"),
                "gnnscale kept": lambda: gnnscale_run(args, model, dropout, bf16=False,
                                                      retain_memory="1"),
                "gnnscale bf16": lambda: gnnscale_run(args, model, dropout, bf16=True),
                "dgl": lambda: dgl_run(args, python, model, dropout, tuned=False, bf16=False),
                "dgl tuned": lambda: dgl_run(args, python, model, dropout, tuned=True,
                                             bf16=False),
                "dgl bf16": lambda: dgl_run(args, python, model, dropout, tuned=False,
                                            bf16=True)}
            runs, failed = {}, {}
            for name in (v for v in VARIANTS if v in args.variants):
                try:
                    runs[name] = runners[name]()
                except subprocess.CalledProcessError as exc:  # e.g. killed at a memory limit
                    failed[name] = f"exit status {exc.returncode}: {exc.stderr[-300:]}"
                    print(f"{model} dropout {dropout} {name}: failed ({failed[name]})",
                          flush=True)
            if "dgl" not in runs:
                raise SystemExit("DGL as installed did not run; every ratio is to it")
            peaks = {k: v[0] for k, v in runs.items()}
            rows.append({"model": model, "dropout": dropout, "peak_rss_mib": peaks,
                         "step_s": {k: v[1] for k, v in runs.items()}, "failed": failed})
            print(f"{model} dropout {dropout}: " + ", ".join(
                f"{k} {v[0]:,.0f} MiB ({v[0] / peaks['dgl']:.2f}x) {v[1]:.3f} s"
                for k, v in runs.items()), flush=True)
    Path(args.out).write_text(json.dumps({"dataset": args.dataset, "hidden": args.hidden,
                                          "epochs": args.epochs, "threads": args.threads,
                                          "rows": rows}, indent=1))
    print_table(rows, "peak_rss_mib", lambda v: f"{v:,.0f} MiB", args.variants)
    print()
    print_table(rows, "step_s", lambda v: f"{v:.3f} s", args.variants)


if __name__ == "__main__":
    main()
