"""The allocator and transparent huge pages: training-step time and peak memory per mode.

One process, 2 threads, R-MAT scale 18 (262,144 nodes, 7.6M edges, 128 features, 16 classes),
2 layers of 256, dropout 0.5, Adam; GCN and SAGE. Each mode runs in its own process (the
allocator settings are per process and fixed before the first allocation), the modes in turn
for ``--rounds`` rounds, so load on this shared host hits all of them alike:

    retain       the trainer's default: glibc keeps freed blocks (gnnscale/engine/memory.py)
    lean         ``GNNSCALE_RETAIN_MEMORY=0``: glibc's defaults, large blocks returned on free
    lean+thp     lean, and torch asks for huge pages for blocks of 2 MiB and more
                 (``THP_MEM_ALLOC_ENABLE=1``; this kernel's THP mode is ``madvise``)
    retain+thp   retain with huge pages

Reported per (model, mode): median step time over the steps after ``--warmup`` (all rounds
together) and the largest peak RSS. Run from the repository root:

    .venv/bin/python benchmarks/allocator_modes.py [--rounds 2] [--steps 6]

Writes benchmarks/results/allocator_modes.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = {
    "retain": {},
    "lean": {"GNNSCALE_RETAIN_MEMORY": "0"},
    "lean+thp": {"GNNSCALE_RETAIN_MEMORY": "0", "THP_MEM_ALLOC_ENABLE": "1"},
    "retain+thp": {"THP_MEM_ALLOC_ENABLE": "1"},
}


def child(model: str, steps: int, scale: int) -> None:
    """Train ``steps`` steps in this process and print one JSON line."""
    import resource
    import time

    import numpy as np
    import torch

    from gnnscale.comm import init
    from gnnscale.data import load_dataset
    from gnnscale.engine import LocalProblem, Trainer
    from gnnscale.nn import GNN

    torch.set_num_threads(2)
    data = load_dataset("rmat", scale=scale, num_features=128, num_classes=16, seed=0)
    torch.manual_seed(0)
    comm = init("single")
    problem = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64), comm)
    trainer = Trainer(GNN(model, 128, 256, 16, num_layers=2, dropout=0.5), problem, comm,
                      lr=0.01, weight_decay=5e-4, seed=0)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        trainer.train_step()
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"steps_s": times, "peak_rss_bytes": peak}))


def run_mode(model: str, mode: str, args) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("GNNSCALE_RETAIN_MEMORY", "THP_MEM_ALLOC_ENABLE")}
    env.update(MODES[mode], PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, __file__, "--child", model, "--steps",
                          str(args.steps), "--scale", str(args.scale)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8, help="steps per process")
    parser.add_argument("--warmup", type=int, default=2, help="untimed first steps")
    parser.add_argument("--scale", type=int, default=18)
    parser.add_argument("--models", nargs="+", default=["gcn", "sage"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/allocator_modes.json"))
    args = parser.parse_args()
    if args.child:
        child(args.child, args.steps, args.scale)
        return
    runs = {(m, mode): [] for m in args.models for mode in MODES}
    for round_ in range(args.rounds):
        for model in args.models:
            for mode in MODES:
                runs[model, mode].append(run_mode(model, mode, args))
                print(f"round {round_ + 1} {model} {mode}: "
                      f"{statistics.median(runs[model, mode][-1]['steps_s'][args.warmup:]):.3f} s",
                      flush=True)
    results = {}
    for (model, mode), done in runs.items():
        steps = [t for run in done for t in run["steps_s"][args.warmup:]]
        results.setdefault(model, {})[mode] = {
            "median_step_s": statistics.median(steps), "steps_s": steps,
            "peak_rss_bytes": max(run["peak_rss_bytes"] for run in done)}
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    record = {"benchmark": "allocator_modes", "workload": f"rmat-{args.scale}, 2 x 256, dropout "
              "0.5, Adam, 1 process x 2 threads", "rounds": args.rounds, "steps": args.steps,
              "warmup": args.warmup, "thp_mode": thp.read_text().strip() if thp.exists() else None,
              "command": "python benchmarks/allocator_modes.py", "results": results}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"\n{'model':6} {'mode':11} {'median step':>12} {'vs retain':>10} {'peak RSS':>10}")
    for model, modes in results.items():
        base = modes["retain"]["median_step_s"]
        for mode, r in modes.items():
            print(f"{model:6} {mode:11} {r['median_step_s']:>10.3f} s "
                  f"{r['median_step_s'] / base:>9.2f}x {r['peak_rss_bytes'] / 2**30:>7.2f} GiB")


if __name__ == "__main__":
    main()
