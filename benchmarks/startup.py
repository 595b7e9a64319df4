"""CPU seconds a process spends before and around its first training step: every rank of every
run pays them once.

Each case runs in a fresh process with one thread, ``--reps`` times; the table gives the median
of the process's user + system CPU seconds (its whole life, imports included):
- ``import torch``;
- torch's Adam built and stepped once on a small model (``torch.optim.Adam``), after importing
  ``gnnscale.engine`` as a run does;
- gnnscale's Adam (``gnnscale.engine.adam.Adam``, the same steps without ``torch._dynamo``);
- ``gnnscale train --dataset cora --epochs 1`` in one process;
- ``gnnscale --help`` (the CLI before torch loads).

    flock /tmp/gnnscale-bench.lock .venv/bin/python benchmarks/startup.py --reps 5

Writes benchmarks/results/startup.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP = ("import torch\nimport gnnscale.engine\nfrom {module} import Adam\n"
        "model = torch.nn.Linear(16, 4)\nopt = Adam(model.parameters(), lr=0.01)\n"
        "model(torch.ones(2, 16)).sum().backward()\nopt.step()\n")
CASES = {
    "import torch": [sys.executable, "-c", "import torch"],
    "torch.optim.Adam, one step": [sys.executable, "-c", STEP.format(module="torch.optim")],
    "gnnscale Adam, one step": [sys.executable, "-c",
                                STEP.format(module="gnnscale.engine.adam")],
    "gnnscale train, Cora, 1 epoch": [sys.executable, "-m", "gnnscale", "train", "--dataset",
                                      "cora", "--data-root", str(ROOT / "datasets"),
                                      "--epochs", "1", "--threads", "1"],
    "gnnscale --help": [sys.executable, "-m", "gnnscale", "--help"],
}


def cpu_seconds(command: list[str]) -> float:
    """User + system CPU seconds of one run of ``command`` (one thread, output discarded)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT,
                   env={**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="fresh processes per case")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/startup.json")
    args = parser.parse_args()
    for command in CASES.values():  # warm the page cache and numba's on-disk cache
        cpu_seconds(command)
    runs = {name: [] for name in CASES}
    for _ in range(args.reps):  # cases interleaved: a slow minute of the host hits them all
        for name, command in CASES.items():
            runs[name].append(round(cpu_seconds(command), 3))
    print(f"{'case':34s} {'CPU s (median)':>15s}")
    for name, values in runs.items():
        print(f"{name:34s} {statistics.median(values):15.2f}")
    args.out.write_text(json.dumps({"reps": args.reps, "cpu_seconds": runs,
                                    "median": {n: statistics.median(v)
                                               for n, v in runs.items()}}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
