"""Soak run: many epochs on several ranks with periodic checkpoints; memory per rank must stay flat.

Not part of CI (minutes of machine time). Run it plainly; it launches itself under ``mpirun``::

    python benchmarks/soak.py                      # 2,000 epochs on 4 ranks (docs/guarantees.md)
    python benchmarks/soak.py --ranks 2 --epochs 300 --out /tmp/soak.json   # a quick look

Each rank trains a GCN on a generated SBM graph through the public API (``load_dataset``, a
partitioner, ``LocalProblem``, ``GNN``, ``Trainer``), saving a checkpoint every
``--checkpoint-every`` epochs with ``save_checkpoint`` (atomic rename on rank 0). After every
epoch each rank samples its resident set size from ``/proc/self/statm``. The report gives, per
rank, the peak RSS over the first and the last 100 epochs, their difference, ``ru_maxrss``, the
loss of the first and last epoch, and the wall time. Results: ``benchmarks/results/soak.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_mb() -> float:
    """Current resident set size of this process, MiB."""
    with open("/proc/self/statm") as handle:
        resident_pages = int(handle.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def window_peaks(rss: list, window: int) -> dict:
    """Peak RSS of the first and the last ``window`` samples of one rank, and the growth."""
    first, last = max(rss[:window]), max(rss[-window:])
    return {"first_window_peak_rss_mb": first, "last_window_peak_rss_mb": last,
            "growth_mb": last - first, "min_rss_mb": min(rss)}


def write_report(args, report: dict) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps({"benchmark": "soak", "target_epochs": args.epochs,
                               "window_epochs": args.window, **report}, indent=2) + "\n")
    tmp.replace(out)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2000)
    parser.add_argument("--window", type=int, default=100, help="epochs per first/last window")
    parser.add_argument("--checkpoint-every", type=int, default=100)
    parser.add_argument("--num-nodes", type=int, default=1000)
    parser.add_argument("--backend", default="mpi", choices=("mpi", "torch"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "soak.json"))
    return parser.parse_args(argv)


def launch(args) -> int:
    """Not under a launcher: start ourselves on ``args.ranks`` ranks."""
    mpirun = Path(sys.prefix) / "bin" / "mpirun"
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMP_NUM_THREADS": "1"}
    cmd = [str(mpirun if mpirun.exists() else "mpirun"), "-n", str(args.ranks),
           "--oversubscribe", sys.executable, __file__, *sys.argv[1:]]
    return subprocess.call(cmd, env=env)


def soak(args) -> None:
    import numpy as np
    import torch

    from gnnscale.comm import init
    from gnnscale.data import load_dataset
    from gnnscale.engine import LocalProblem, Trainer, read_checkpoint, save_checkpoint
    from gnnscale.nn import GNN
    from partitioning import make_partitioner

    torch.set_num_threads(1)
    comm = init(args.backend)
    data = load_dataset("sbm", num_nodes=args.num_nodes)
    parts = make_partitioner("metis", num_parts=comm.size, seed=0).fit(data).node_parts
    problem = LocalProblem.from_graph_data(data, np.asarray(parts, dtype=np.int64), comm)
    torch.manual_seed(0)
    model = GNN("gcn", problem.num_features, 16, problem.num_classes, num_layers=2, dropout=0.5)
    trainer = Trainer(model, problem, comm, seed=0)
    checkpoint_dir = Path(tempfile.mkdtemp(prefix="gnnscale-soak-")) if comm.rank == 0 else None
    checkpoint_dir = comm.broadcast_object(str(checkpoint_dir) if checkpoint_dir else None)
    rss, losses, checkpoints = [], [], 0
    start = time.perf_counter()
    while trainer.epoch < args.epochs:
        record = trainer.run_epoch()
        losses.append(record.loss)
        if trainer.epoch % args.checkpoint_every == 0:
            save_checkpoint(trainer, checkpoint_dir)
            checkpoints += 1
        rss.append(rss_mb())
        if trainer.epoch % args.window == 0:
            # collective: every rank's RSS so far; a run stopped early still leaves a report
            everyone = comm.allgather_object(rss)
            if comm.rank == 0:
                print(f"epoch {trainer.epoch}: loss {record.loss:.4f}, rss per rank "
                      f"{[round(r[-1], 1) for r in everyone]} MiB, "
                      f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
                if trainer.epoch < args.epochs:
                    write_report(args, {"complete": False, "epochs_done": trainer.epoch,
                                        "wall_s": time.perf_counter() - start,
                                        "per_rank": [window_peaks(r, args.window)
                                                     for r in everyone]})
    wall_s = time.perf_counter() - start
    if comm.rank == 0:
        assert read_checkpoint(checkpoint_dir)["epoch"] == args.epochs  # the last one is whole
    w = args.window
    mine = {"rank": comm.rank, **window_peaks(rss, w), "ru_maxrss_mb": resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    everyone = comm.allgather_object(mine)
    if comm.rank == 0:
        import shutil

        shutil.rmtree(checkpoint_dir, ignore_errors=True)
        report = {"complete": True, "ranks": comm.size, "backend": comm.backend,
                  "epochs": args.epochs, "window_epochs": w,
                  "checkpoint_every": args.checkpoint_every, "checkpoints_written": checkpoints,
                  "graph": f"sbm {data.num_nodes} nodes {data.num_edges} edges",
                  "model": "gcn 2 layers hidden 16 dropout 0.5",
                  "wall_s": wall_s, "mean_epoch_s": wall_s / args.epochs,
                  "first_loss": losses[0], "last_loss": losses[-1],
                  "max_growth_mb": max(r["growth_mb"] for r in everyone),
                  "per_rank": everyone,
                  "host": {"cpus": os.cpu_count(), "load_avg_at_end": os.getloadavg(),
                           "python": platform.python_version(), "torch": torch.__version__}}
        write_report(args, report)
        print(json.dumps({k: v for k, v in report.items() if k != "per_rank"}, indent=2))
        for row in everyone:
            print(row)


def main() -> int:
    args = parse_args()
    from gnnscale.comm import detect_launch

    if detect_launch().launcher == "none":
        return launch(args)
    soak(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
