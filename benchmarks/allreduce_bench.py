"""Allreduce latency and bandwidth, 1 KB to 64 MB: gnnscale's backends vs plain torch gloo.

Run on 2 ranks (the figures of docs/performance.md)::

    mpirun -n 2 -x OMP_NUM_THREADS=1 python benchmarks/allreduce_bench.py

Variants, all in the same processes and interleaved size by size and repetition by repetition:

- ``gnnscale-mpi``: ``init("mpi").allreduce`` (checked mode on, its default) on an ordinary
  tensor: data ride with the signature up to 2 KiB, MPI's allreduce up to 1 MiB, the ring above;
- ``gnnscale-mpi-shm``: the same on a tensor from ``alloc_buffer`` (shared memory), the path
  DataParallel's gradient buckets take;
- ``gnnscale-mpi-unchecked``: the same with ``check=False`` (the price of checked mode);
- ``gnnscale-torch``: ``init("torch").allreduce`` (gloo on CPU, checked over MPI);
- ``torch-gloo``: plain ``torch.distributed.all_reduce`` on the same gloo group (the peer);
- ``mpi4py``: plain ``MPI.COMM_WORLD.Allreduce`` (what the MPI library does by itself).

Each sample times ``inner`` back-to-back float32 allreduces after a barrier (more for small
sizes, so a sample lasts a few ms); the report holds per-size medians of the slowest rank, the
algorithm bandwidth ``bytes / time``, and ratios to ``torch-gloo``. With ``--device cuda`` the
torch variants run on GPU tensors through NCCL and the MPI ones are skipped.
Results: ``benchmarks/results/allreduce_bench.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gnnscale.comm import init  # noqa: E402

SIZES = [1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="gnnscale-mpi,gnnscale-mpi-shm,"
                        "gnnscale-mpi-unchecked,gnnscale-torch,torch-gloo,mpi4py")
    parser.add_argument("--max-bytes", type=int, default=SIZES[-1])
    parser.add_argument("--reps", type=int, default=9, help="samples per size and variant")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--out", default=str(Path(__file__).with_name("results") /
                                             "allreduce_bench.json"))
    return parser.parse_args(argv)


def make_callers(variants, device):
    """``{variant: allreduce(tensor)}``, and the variants that need their own buffer."""
    callers, mpi_world, own_buffer = {}, None, {}
    need_mpi = any(v.startswith("gnnscale-mpi") or v == "mpi4py" for v in variants)
    if need_mpi and device == "cpu":
        from mpi4py import MPI

        mpi_world = MPI.COMM_WORLD
    torch_comm = init("torch", device=device)
    for variant in variants:
        if variant in ("gnnscale-mpi", "gnnscale-mpi-shm") and mpi_world is not None:
            comm = init("mpi")
            callers[variant] = comm.allreduce
            if variant.endswith("shm"):
                own_buffer[variant] = comm
        elif variant == "gnnscale-mpi-unchecked" and mpi_world is not None:
            comm = init("mpi", check=False)
            callers[variant] = comm.allreduce
        elif variant == "gnnscale-torch":
            callers[variant] = torch_comm.allreduce
        elif variant == "torch-gloo":
            callers[variant] = lambda t: dist.all_reduce(t)
        elif variant == "mpi4py" and mpi_world is not None:
            from mpi4py import MPI

            callers[variant] = lambda t: mpi_world.Allreduce(MPI.IN_PLACE, t.numpy())
    return callers, torch_comm, own_buffer


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    variants = args.variants.split(",")
    callers, torch_comm, own_buffer = make_callers(variants, args.device)
    variants = [v for v in variants if v in callers]
    rank, size = torch_comm.rank, torch_comm.size
    sizes = [s for s in SIZES if s <= args.max_bytes]
    results = {}
    for nbytes in sizes:
        buffer = torch.ones(nbytes // 4, device=args.device)
        buffers = {v: buffer for v in variants}
        for variant, comm in own_buffer.items():
            buffers[variant] = comm.alloc_buffer(nbytes // 4)
        inner = int(max(1, min(200, (4 << 20) // nbytes)))
        samples = {v: [] for v in variants}
        for variant in variants:  # warm-up
            callers[variant](buffers[variant])
        for rep in range(args.reps):
            order = variants[rep % len(variants):] + variants[:rep % len(variants)]
            for variant in order:
                torch_comm.barrier()
                if args.device == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(inner):
                    callers[variant](buffers[variant])
                if args.device == "cuda":
                    torch.cuda.synchronize()
                samples[variant].append((time.perf_counter() - start) / inner)
        entry = {}
        for variant in variants:
            slowest = torch_comm.allreduce(torch.tensor(samples[variant], dtype=torch.float64,
                                                        device=args.device), "max").cpu()
            seconds = float(np.median(slowest.numpy()))
            entry[variant] = {"latency_us": seconds * 1e6, "algbw_GBps": nbytes / seconds / 1e9}
        if "torch-gloo" in entry:
            base = entry["torch-gloo"]["latency_us"]
            for variant in variants:
                entry[variant]["speedup_vs_torch_gloo"] = base / entry[variant]["latency_us"]
        results[str(nbytes)] = entry
        for variant, comm in own_buffer.items():
            comm.free_buffer(buffers[variant])
        if rank == 0:
            cells = "  ".join(f"{v}={entry[v]['latency_us']:.1f}us" for v in variants)
            print(f"{nbytes:>9} B  {cells}", flush=True)
    if rank == 0:
        report = {"benchmark": "allreduce", "ranks": size, "dtype": "float32",
                  "load_average_at_end": os.getloadavg(),
                  "device": args.device, "reps": args.reps, "host": platform.node(),
                  "cpu_count": os.cpu_count(), "torch": torch.__version__,
                  "sizes_bytes": sizes, "results": results}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1))
        print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
