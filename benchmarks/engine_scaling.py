"""Where the engine's time goes on one machine: roofline, ranks vs threads, overlap, memory.

Run from the repository root with the project's venv:

    .venv/bin/python benchmarks/engine_scaling.py [--scale 18] [--epochs 6]

1. Roofline: the machine's memory bandwidth (NumPy copy and triad over 1 GiB arrays, measured
   here, in this run) against the bandwidth the compiled aggregation kernel achieves on the
   workload's graph (bytes it must move: the CSR arrays once, one source row per non-zero,
   the output once), at the two widths a 2-layer 128 -> 256 -> 16 GCN aggregates.
2. Ranks vs threads: `gnnscale train --profile` on the same workload as 1 rank x 2 threads,
   2 ranks x 1 thread and 4 ranks x 1 thread (oversubscribed on 2 cores): epoch time, compute,
   the halo exchange waited for at once vs the part still exposed with overlap (so the
   fraction of the exchange hidden), bytes sent and peak memory per rank.
3. The same multi-rank runs with the halo exchange on a *simulated* network
   (``--simulate-network``, default 50 us + 10 Gbit/s): on one host the real exchange is a
   shared-memory copy of a few ms, so the overlap fraction there mostly measures waiting for a
   slower peer, which no overlap can hide.
Writes benchmarks/results/engine_scaling.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def stream_bandwidth(gib: float = 1.0, reps: int = 5) -> dict:
    """Best-of-reps copy and triad bandwidth in GB/s (bytes read + written)."""
    n = int(gib * 2**30 / 8)
    a, b, c = np.ones(n), np.ones(n), np.empty(n)
    best = {"copy_gbs": 0.0, "triad_gbs": 0.0}
    for _ in range(reps):
        t = time.perf_counter()
        np.copyto(c, a)
        best["copy_gbs"] = max(best["copy_gbs"], 2 * 8 * n / (time.perf_counter() - t) / 1e9)
        t = time.perf_counter()
        np.multiply(b, 3.0, out=c)
        np.add(a, c, out=c)
        # triad as two passes: 5 array traversals
        best["triad_gbs"] = max(best["triad_gbs"], 5 * 8 * n / (time.perf_counter() - t) / 1e9)
    return best


def aggregation_bandwidth(scale: int, threads: int, reps: int = 5) -> dict:
    import torch

    from gnnscale.data import generate_rmat
    from gnnscale.graph.kernels import csr_spmm

    torch.set_num_threads(threads)
    data = generate_rmat(scale=scale, num_features=4, num_classes=2, seed=0)
    indptr, indices = data.indptr, data.indices
    values = np.random.default_rng(0).random(indices.size).astype(np.float32)
    out = {"nodes": data.num_nodes, "edges": int(indices.size)}
    for width in (128, 16):
        x = np.random.default_rng(1).random((data.num_nodes, width), dtype=np.float32)
        csr_spmm(indptr, indices, values, x, data.num_nodes, threads)  # compile, warm
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            csr_spmm(indptr, indices, values, x, data.num_nodes, threads)
            times.append(time.perf_counter() - t)
        moved = indptr.nbytes + indices.nbytes + values.nbytes + \
            indices.size * width * 4 + data.num_nodes * width * 4
        best = min(times)
        out[f"width_{width}"] = {"median_s": statistics.median(times), "best_s": best,
                                 "bytes_moved": moved, "achieved_gbs": moved / best / 1e9}
    return out


def profiled_run(ranks: int, threads: int, args, network: str | None = None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "m.jsonl"
        cli = [sys.executable, "-m", "gnnscale", "train", "--dataset", "rmat",
               "--dataset-option", f"scale={args.scale}", "--dataset-option", "num_features=128",
               "--dataset-option", "num_classes=16", "--hidden", "256", "--model", args.model,
               "--epochs", str(args.epochs), "--threads", str(threads), "--profile",
               "--no-progress", "--partitioner", "metis", "--balance", "nodes,edges",
               "--metrics-out", str(metrics)]
        if network:
            cli += ["--simulate-network", network]
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        if ranks > 1:
            mpirun = str(Path(sys.executable).parent / "mpirun")
            cli = [mpirun, "-n", str(ranks), "--oversubscribe", *cli]
        t = time.perf_counter()
        done = subprocess.run(cli, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=3600)
        if done.returncode != 0:
            return {"error": done.stderr[-2000:]}
        summary = json.loads(metrics.read_text().splitlines()[-1])
    return {"ranks": ranks, "threads_per_rank": threads, "wall_s": time.perf_counter() - t,
            "network": f"simulated {network} (latency us, Gbit/s)" if network else "real",
            "mean_epoch_time_s": summary["mean_epoch_time_s"],
            "per_rank": summary["per_rank"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=18)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--model", default="gcn")
    parser.add_argument("--configs", default="1x2,2x1,4x1", help="RANKSxTHREADS list")
    parser.add_argument("--simulate-network", default="50,10", metavar="LATENCY_US,GBIT_PER_S",
                        help="also run the multi-rank configs with the halo exchange on this "
                             "simulated network ('' to skip)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/engine_scaling.json"))
    args = parser.parse_args()
    report = {"benchmark": "engine_scaling", "scale": args.scale, "model": args.model,
              "loadavg_start": os.getloadavg()}
    report["memory_bandwidth"] = stream_bandwidth()
    print("memory bandwidth", report["memory_bandwidth"], flush=True)
    report["aggregation"] = aggregation_bandwidth(args.scale, threads=2)
    for width in (128, 16):
        entry = report["aggregation"][f"width_{width}"]
        entry["roofline_fraction"] = entry["achieved_gbs"] / report["memory_bandwidth"]["copy_gbs"]
        print(f"aggregation width {width}: {entry['achieved_gbs']:.1f} GB/s = "
              f"{entry['roofline_fraction']:.0%} of copy bandwidth", flush=True)
    report["runs"] = []
    plan = [(config, None) for config in args.configs.split(",")]
    if args.simulate_network:
        plan += [(config, args.simulate_network) for config in args.configs.split(",")
                 if not config.startswith("1x")]
    for config, network in plan:
        ranks, threads = (int(v) for v in config.split("x"))
        run = profiled_run(ranks, threads, args, network)
        report["runs"].append(run)
        if "error" in run:
            print(f"{config}: failed: {run['error'][-300:]}", flush=True)
            continue
        ranks_info = run["per_rank"]
        print(f"{config} {run['network']}: epoch {run['mean_epoch_time_s']:.3f} s; halo whole "
              f"{[round(r.get('halo_comm_s', 0) * 1e3, 1) for r in ranks_info]} ms, exposed "
              f"{[round(r.get('halo_exposed_s', 0) * 1e3, 1) for r in ranks_info]} ms; "
              f"overlap fraction "
              f"{[round(r.get('overlap_fraction', 1.0), 2) for r in ranks_info]}; peak MiB "
              f"{[round(r['peak_rss_mb']) for r in ranks_info]}", flush=True)
    report["loadavg_end"] = os.getloadavg()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
