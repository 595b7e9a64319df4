"""What quantized halo exchange costs in accuracy: the same training with halo rows (and halo
gradients) on the wire as float32, int8, int4 and int2, seed by seed.

Run from the repository root under the benchmark lock (4 ranks; the default 36 trainings of
60 epochs took 129 s on 2 cores, ``wall_s`` in the results):

    flock /tmp/gnnscale-bench.lock mpirun -n 4 .venv/bin/python \\
        benchmarks/quantized_halo_accuracy.py

Each (dataset, seed) is partitioned once with METIS into one part per rank; every wire format
then trains from the same initial weights and dropout seed: GCN, 2 layers of ``--hidden`` (16)
units, dropout 0.5, Adam (lr 0.01, weight decay 5e-4), ``--epochs`` epochs with evaluation
each; the figure is the test accuracy at the epoch of the best validation accuracy. The wire
formats are ``HaloPlan.configure(message_dtype=..., gradient_dtype=...)``: rows as named, and
for int4 and int2 the gradients as int8 (``int2/g-int8``) or at the rows' width
(``int2/g-int2``: what ``--halo-dtype int2`` sends), to choose the gradients' width. Halo
bytes are those of one training step, summed over the ranks. Datasets from ``datasets/``
(``GNNSCALE_DATA_ROOT`` overrides). Writes ``benchmarks/results/quantized_halo_accuracy.json``
and prints one row per (dataset, format): mean and standard deviation of the test accuracy
over seeds, the mean and largest per-seed difference against float32, and the bytes.
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

from gnnscale.comm import init
from gnnscale.data import load_dataset
from gnnscale.engine import LocalProblem, Trainer
from gnnscale.graph.quantize import QuantizedWire
from gnnscale.nn import GNN
from partitioning import make_partitioner

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("GNNSCALE_DATA_ROOT") or REPO / "datasets")
#: name -> (message_dtype, gradient_dtype)
FORMATS = {
    "float32": (None, None),
    "int8": (QuantizedWire(8), QuantizedWire(8)),
    "int4/g-int8": (QuantizedWire(4), QuantizedWire(8)),
    "int2/g-int8": (QuantizedWire(2), QuantizedWire(8)),
    "int2/g-int2": (QuantizedWire(2), QuantizedWire(2)),
    "int4/g-int4": (QuantizedWire(4), QuantizedWire(4)),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", nargs="+", default=["cora", "citeseer"],
                   choices=["cora", "citeseer"])
    p.add_argument("--formats", nargs="+", default=list(FORMATS), choices=list(FORMATS))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=60)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--out", default=str(REPO / "benchmarks/results/quantized_halo_accuracy.json"))
    return p.parse_args(argv)


def best_val_test(problem, comm, data, seed: int, wire: str, args) -> dict:
    """Train once; the test accuracy at the best validation epoch, and the halo bytes."""
    message, gradient = FORMATS[wire]
    problem.graph.halo_plan.configure(message_dtype=message, gradient_dtype=gradient,
                                      quantize_seed=seed)
    torch.manual_seed(seed)
    net = GNN("gcn", data.num_features, args.hidden, data.num_classes, num_layers=2,
              dropout=0.5)
    trainer = Trainer(net, problem, comm, lr=0.01, weight_decay=5e-4, seed=seed)
    best_val, test, halo_bytes = -1.0, 0.0, 0
    for _ in range(args.epochs):
        record = trainer.run_epoch()
        halo_bytes = record.halo_bytes_sent
        if record.val_acc > best_val:
            best_val, test = record.val_acc, record.test_acc
    total = int(comm.allreduce(torch.tensor([halo_bytes], dtype=torch.float64)))
    return {"val": best_val, "test": test, "halo_bytes_per_step": total}


def main(argv=None) -> None:
    args = parse_args(argv)
    comm = init()
    torch.set_num_threads(1)
    results = {"ranks": comm.size, "epochs": args.epochs, "hidden": args.hidden,
               "seeds": args.seeds, "runs": {}}
    start = time.perf_counter()
    for name in args.datasets:
        data = load_dataset(name, root=DATA_ROOT)
        parts = make_partitioner("metis", num_parts=comm.size, seed=0).fit(data).node_parts
        problem = LocalProblem.from_graph_data(data, parts, comm)
        for wire in args.formats:
            runs = []
            for seed in range(args.seeds):
                runs.append(best_val_test(problem, comm, data, seed, wire, args))
                if comm.rank == 0:
                    print(f"{name} {wire} seed {seed}: {runs[-1]}", flush=True)
            results["runs"][f"{name}/{wire}"] = runs
    results["wall_s"] = time.perf_counter() - start
    if comm.rank != 0:
        return
    table = {}
    for name in args.datasets:
        base = [r["test"] for r in results["runs"].get(f"{name}/float32", [])]
        for wire in args.formats:
            runs = results["runs"][f"{name}/{wire}"]
            tests = [r["test"] for r in runs]
            row = {"test_mean": statistics.mean(tests),
                   "test_std": statistics.pstdev(tests),
                   "halo_bytes_per_step": runs[0]["halo_bytes_per_step"]}
            if base:
                diffs = [t - b for t, b in zip(tests, base)]
                row["diff_mean"] = statistics.mean(diffs)
                row["diff_worst"] = min(diffs)
            table[f"{name}/{wire}"] = row
            print(f"{name:9s} {wire:12s} test {100 * row['test_mean']:5.1f} "
                  f"+- {100 * row['test_std']:3.1f}  diff "
                  f"{100 * row.get('diff_mean', 0):+5.2f} (worst "
                  f"{100 * row.get('diff_worst', 0):+5.2f})  halo bytes/step "
                  f"{row['halo_bytes_per_step']}", flush=True)
    results["table"] = table
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
