"""CNN training step time: gnnscale DataParallel vs torch DistributedDataParallel (gloo).

Run on 2 ranks x 1 thread (the figures of docs/performance.md)::

    mpirun -n 2 -x OMP_NUM_THREADS=1 python benchmarks/cnn_step_bench.py

Per model (a ~1.2M-parameter ResNet, and the same body with a VGG-like FC head, ~22M
parameters / ~88 MB of gradients) and per variant, one training step (zero_grad, forward,
backward, SGD step) on synthetic CIFAR-shaped data:

- ``none``: the same step with no communication at all (each rank alone);
- ``ddp``: ``torch.nn.parallel.DistributedDataParallel`` over gloo, default settings;
- ``gnnscale-mpi`` / ``gnnscale-torch``: :class:`gnnscale.parallel.DataParallel` over the MPI
  and the torch (gloo) backends, default settings (bucket size from the latency fit).

Variants are interleaved step by step (rotating the order each repetition) so that load from
other processes hits all of them alike; a step's time is the slowest rank's; the report holds
medians, the communication overhead (``variant - none``) and same-run ratios to DDP. It also
reports each step's process CPU time (all threads of the rank, max over ranks): on a shared
machine wall time includes waiting for a core, CPU time does not. Results:
``benchmarks/results/cnn_step_bench.json``.
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
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gnnscale.comm import init  # noqa: E402
from gnnscale.cnn import count_parameters, resnet_small, resnet_small_fc  # noqa: E402
from gnnscale.parallel import DataParallel  # noqa: E402

MODELS = {"resnet_small": resnet_small, "resnet_small_fc": resnet_small_fc}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet_small,resnet_small_fc")
    parser.add_argument("--variants", default="none,ddp,gnnscale-mpi,gnnscale-torch")
    parser.add_argument("--batch", type=int, default=32, help="images per rank per step")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--reps", type=int, default=12, help="measured steps per variant")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured steps per variant")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results") /
                                             "cnn_step_bench.json"))
    return parser.parse_args(argv)


def build(variant: str, model_name: str, comms: dict, seed: int = 0):
    torch.manual_seed(seed)
    model = MODELS[model_name]()
    if variant == "ddp":
        wrapped = torch.nn.parallel.DistributedDataParallel(model)
    elif variant.startswith("gnnscale-"):
        wrapped = DataParallel(model, comms[variant.split("-", 1)[1]])
    else:
        wrapped = model
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.01, momentum=0.9)
    return wrapped, optimizer


def step(wrapped, optimizer, images, labels) -> None:
    optimizer.zero_grad()
    F.cross_entropy(wrapped(images), labels).backward()
    optimizer.step()


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    comms = {"mpi": init("mpi"), "torch": init("torch", device="cpu")}
    world = comms["mpi"]
    rank, size = world.rank, world.size
    variants = args.variants.split(",")
    gen = torch.Generator().manual_seed(rank)
    images = torch.randn(args.batch, 3, args.image_size, args.image_size, generator=gen)
    labels = torch.randint(0, 10, (args.batch,), generator=gen)
    report = {"benchmark": "cnn_step", "ranks": size, "load_average_at_start": os.getloadavg(),
              "threads_per_rank": torch.get_num_threads(),
              "batch_per_rank": args.batch, "image_size": args.image_size, "reps": args.reps,
              "host": platform.node(), "cpu_count": os.cpu_count(),
              "torch": torch.__version__, "models": {}}
    for model_name in args.models.split(","):
        setups = {v: build(v, model_name, comms) for v in variants}
        params = count_parameters(setups[variants[0]][0])
        times = {v: [] for v in variants}
        cpu = {v: [] for v in variants}
        hidden = {v: [] for v in variants}
        exposed = {v: [] for v in variants}
        for rep in range(args.warmup + args.reps):
            order = variants[rep % len(variants):] + variants[:rep % len(variants)]
            for variant in order:
                wrapped, optimizer = setups[variant]
                world.barrier()
                start, cpu_start = time.perf_counter(), time.process_time()
                step(wrapped, optimizer, images, labels)
                elapsed = time.perf_counter() - start
                cpu_s = time.process_time() - cpu_start
                if rep >= args.warmup:
                    times[variant].append(elapsed)
                    cpu[variant].append(cpu_s)
                    stats = getattr(wrapped, "stats", None)
                    if stats:
                        hidden[variant].append(stats["hidden_fraction"])
                        exposed[variant].append(stats["exposed_comm_s"])
        # a step ends when its slowest rank ends
        for variant in variants:
            times[variant] = world.allreduce(torch.tensor(times[variant], dtype=torch.float64),
                                             "max").tolist()
            cpu[variant] = world.allreduce(torch.tensor(cpu[variant], dtype=torch.float64),
                                           "max").tolist()
        median = {v: float(np.median(times[v])) for v in variants}
        median_cpu = {v: float(np.median(cpu[v])) for v in variants}
        result = {"parameters": params, "gradient_mb": params * 4 / 2**20,
                  "median_step_s": median, "median_step_cpu_s": median_cpu,
                  "steps_s": times, "steps_cpu_s": cpu}
        if "none" in median_cpu:
            result["cpu_overhead_s"] = {v: median_cpu[v] - median_cpu["none"] for v in variants
                                        if v != "none"}
        if "none" in median:
            result["overhead_s"] = {v: median[v] - median["none"] for v in variants if v != "none"}
        if "ddp" in median:
            result["step_ratio_vs_ddp"] = {v: median[v] / median["ddp"] for v in variants
                                           if v.startswith("gnnscale")}
            if "none" in median and result["overhead_s"]["ddp"] > 0:
                result["overhead_ratio_vs_ddp"] = {
                    v: result["overhead_s"][v] / result["overhead_s"]["ddp"]
                    for v in variants if v.startswith("gnnscale")}
        result["hidden_fraction_median"] = {v: float(np.median(h)) for v, h in hidden.items() if h}
        result["exposed_comm_s_median"] = {v: float(np.median(e)) for v, e in exposed.items() if e}
        report["models"][model_name] = result
        if rank == 0:
            print(json.dumps({model_name: {k: result[k] for k in result
                                           if not k.startswith("steps_")}}, indent=1), flush=True)
        del setups
    report["load_average_at_end"] = os.getloadavg()
    if rank == 0:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1))
        print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
