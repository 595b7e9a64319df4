"""The planner's placement choice on this host, checked: one rank of 2 threads against two
ranks of one thread.

For each graph and model, ``gnnscale tune --cores 2 --host-cores 2 --placements host,core``
predicts the training step and evaluation pass of both placements (METIS; with
``--cost-model``'s constants) and says which it picks; then ``gnnscale train`` runs both,
alternating, ``--reps`` times each (``--threads 2`` in one process; ``mpirun -n 2 --threads 1``),
and the medians over the runs of each run's median step (epochs 2..) and evaluation are set
beside the predictions. The choice agrees when the placement predicted faster per epoch is the
one measured faster (or both are within ``--tie`` of each other, measured).

    flock /tmp/gnnscale-bench.lock .venv/bin/python benchmarks/placement_check.py --reps 5 \
        --cost-model benchmarks/results/placement-cost-model.json

(the constants from ``gnnscale tune --calibrate``; docs/planning.md gives the command).

Writes benchmarks/results/placement_check.json and prints the table of docs/planning.md.
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

from _workload import training_step_s

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GRAPHS = {"rmat-17": ["--dataset", "rmat", "--dataset-option", "scale=17"],
          "tolokers": ["--dataset", "tolokers", "--data-root", str(ROOT / "datasets")]}
PLACEMENTS = {"host": (1, 2), "core": (2, 1)}  # name: (ranks, threads per rank)


def run(command: list[str]) -> None:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "PATH": f"{BIN}:{os.environ['PATH']}"}
    env.pop("OMP_NUM_THREADS", None)  # --threads says it
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")


def predicted(graph: list[str], model: str, cost_model: str, folder: Path) -> dict:
    out = folder / "tune"
    run([str(BIN / "gnnscale"), "tune", *graph, "--model", model, "--methods", "metis",
         "--cores", "2", "--host-cores", "2", "--placements", "host,core", "--cost-model",
         cost_model, "--out", str(out), "--no-plot", "--no-progress"])
    result = json.loads(out.with_suffix(".json").read_text())
    rows = {r["placement"]: {"step_s": r["predicted_step_s"], "eval_s": r["predicted_eval_s"]}
            for r in result["rows"]}
    return {"rows": rows, "chosen": result["recommended"]["placement"]}


def measured(graph: list[str], model: str, placement: str, epochs: int, folder: Path) -> dict:
    ranks, threads = PLACEMENTS[placement]
    metrics = folder / f"{placement}.jsonl"
    launch = [str(BIN / "mpirun"), "-n", str(ranks)] if ranks > 1 else []
    run([*launch, str(BIN / "gnnscale"), "train", *graph, "--model", model, "--partitioner",
         "metis", "--epochs", str(epochs), "--threads", str(threads), "--no-progress",
         "--metrics-out", str(metrics)])
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    epochs_run = [r for r in records if not r.get("summary")][1:]
    steps = [training_step_s(r["time"]) for r in epochs_run]
    return {"step_s": statistics.median(steps),
            "eval_s": statistics.median(r["time"]["eval_s"] for r in epochs_run)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS), choices=list(GRAPHS))
    parser.add_argument("--models", nargs="+", default=["gcn", "sage"])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--tie", type=float, default=0.05,
                        help="measured epochs this close (relative) count as a tie")
    parser.add_argument("--cost-model",
                        default=str(ROOT / "benchmarks/results/cost_model_here.json"))
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks/results/placement_check.json")
    args = parser.parse_args()
    cells = []
    for graph in args.graphs:
        for model in args.models:
            with tempfile.TemporaryDirectory() as folder:
                prediction = predicted(GRAPHS[graph], model, args.cost_model, Path(folder))
                runs = {p: [] for p in PLACEMENTS}
                for _ in range(args.reps):
                    for placement in PLACEMENTS:
                        runs[placement].append(measured(GRAPHS[graph], model, placement,
                                                        args.epochs, Path(folder)))
            meas = {p: {k: statistics.median(r[k] for r in rs) for k in ("step_s", "eval_s")}
                    for p, rs in runs.items()}
            epoch = {p: v["step_s"] + v["eval_s"] for p, v in meas.items()}
            faster = min(epoch, key=epoch.get)
            tie = abs(epoch["host"] / epoch["core"] - 1) <= args.tie
            cell = {"graph": graph, "model": model, "predicted": prediction["rows"],
                    "chosen": prediction["chosen"], "measured": meas, "runs": runs,
                    "measured_faster": faster, "tie": tie,
                    "agrees": tie or faster == prediction["chosen"]}
            cells.append(cell)
            print(json.dumps({k: cell[k] for k in ("graph", "model", "chosen",
                                                   "measured_faster", "tie", "agrees")}),
                  flush=True)
    args.out.write_text(json.dumps({"reps": args.reps, "epochs": args.epochs,
                                    "cost_model": args.cost_model, "cells": cells},
                                   indent=1) + "\n")
    print(table(cells))


def table(cells: list[dict]) -> str:
    """The docs/planning.md table: per graph and model, each placement's step and evaluation
    predicted / measured (ms), the planner's choice and whether it agrees."""
    lines = ["| graph | model | 1 rank x 2 threads: step, eval pred / meas (ms) | 2 ranks x 1 "
             "thread: step, eval pred / meas (ms) | planner picks | measured faster | agrees |",
             "|---|---|---|---|---|---|---|"]
    label = {"host": "1 x 2", "core": "2 x 1"}
    for c in cells:
        pred, meas = c["predicted"], c["measured"]
        parts = [f"{pred[p]['step_s'] * 1e3:.0f} / {meas[p]['step_s'] * 1e3:.0f}, "
                 f"{pred[p]['eval_s'] * 1e3:.0f} / {meas[p]['eval_s'] * 1e3:.0f}"
                 for p in PLACEMENTS]
        lines.append(f"| {c['graph']} | {c['model']} | {parts[0]} | {parts[1]} | "
                     f"{label[c['chosen']]} | {label[c['measured_faster']]}"
                     f"{' (tie)' if c['tie'] else ''} | {'yes' if c['agrees'] else 'no'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
