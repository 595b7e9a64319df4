"""The engine's float32 products through torch (MKL) and through oneDNN (gnnscale.nn.gemm).

    .venv/bin/python benchmarks/gemm_backends.py [--threads 2] [--reps 7]
    .venv/bin/python benchmarks/gemm_backends.py --steps [--models sage gcn]

Shapes: those of the 2-layer SAGE/GCN step on R-MAT 18 (128 features, 256 hidden, 16
classes; the first layer computing the 205,554 rows the loss reads): the first layer's
product, a 2,048-row block of the fused transform's products (forward, the gradient through
the weight, the weight gradients) and a whole tall weight gradient (``mm_tn``). Each product is
timed alone, median of ``--reps`` after one warm-up, and reported in ms and GFLOP/s with the
ratio torch / oneDNN (above 1: oneDNN is faster). Written to
``benchmarks/results/gemm_backends.json`` with the processor's name and torch's version.

``--steps`` times whole training steps instead: the engine tables' workload (R-MAT 18, 128
features, 2 layers of 256, dropout 0.5, Adam) with one trainer per model, the backend switched
between steps (2 warm-up and ``--reps`` timed rounds of one step each), medians printed and
written under ``steps`` in the same file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--steps", action="store_true",
                        help="alternate whole training steps between the backends instead")
    parser.add_argument("--models", nargs="+", default=["sage", "gcn"],
                        help="--steps: the models to train")
    parser.add_argument("--out", default="benchmarks/results/gemm_backends.json")
    return parser.parse_args(argv)


ARGS = parse_args()
os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(ARGS.threads)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from gnnscale.engine.memory import retain_freed_memory  # noqa: E402
from gnnscale.nn import gemm  # noqa: E402

ROWS = 205_554  # rows the first layer computes (R-MAT 18, the loss's rows and those they read)
BLOCK = 2048  # rows per block of the fused transform


def cases():
    """(name, M, K, N, run(mm, mm_tn, addmm)) per product."""
    g = torch.Generator().manual_seed(0)
    stacked, w1 = torch.randn(ROWS, 256, generator=g), torch.randn(256, 256, generator=g)
    grad_pre = torch.randn(ROWS, 256, generator=g)
    act, w2 = torch.randn(BLOCK, 256, generator=g), torch.randn(32, 256, generator=g)
    grad_block, pre_block = torch.randn(BLOCK, 32, generator=g), torch.randn(BLOCK, 256, generator=g)
    acc = torch.zeros(256, 256)
    return [
        ("first layer [205554,256] x [256,256]", ROWS, 256, 256,
         lambda: gemm.mm(stacked, w1.t())),
        ("block forward [2048,256] x [256,32]", BLOCK, 256, 32,
         lambda: gemm.mm(act, w2.t())),
        ("block through [2048,32] x [32,256]", BLOCK, 32, 256,
         lambda: gemm.mm(grad_block, w2)),
        ("block weight grad [32,2048] x [2048,256]", 32, BLOCK, 256,
         lambda: gemm.addmm(acc[:32].contiguous(), grad_block.t(), act)),
        ("block weight grad [256,2048] x [2048,256]", 256, BLOCK, 256,
         lambda: gemm.addmm(acc, pre_block.t(), act)),
        ("tall weight grad [256,205554] x [205554,256]", 256, ROWS, 256,
         lambda: gemm.mm_tn(stacked, grad_pre)),
    ]


def timed(run, reps: int) -> float:
    inner = 1
    start = time.perf_counter()
    run()
    if time.perf_counter() - start < 0.01:
        inner = 50
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(inner):
            run()
        times.append((time.perf_counter() - start) / inner)
    return statistics.median(times)


def processor() -> str:
    return gemm.cpu_info("model name") or platform.processor()


def alternating_steps(model: str) -> dict:
    """Median training step per backend, the backend switched between steps."""
    import numpy as np

    from gnnscale.comm import init
    from gnnscale.data import generate_rmat
    from gnnscale.engine import LocalProblem, Trainer
    from gnnscale.nn import GNN

    data = generate_rmat(scale=18, edge_factor=16, seed=0, num_features=128, num_classes=16)
    torch.manual_seed(0)
    net = GNN(model, data.num_features, 256, data.num_classes, num_layers=2, dropout=0.5)
    comm = init("single")
    problem = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64), comm)
    trainer = Trainer(net, problem, comm, lr=0.01, weight_decay=5e-4, seed=0)
    times = {"torch": [], "onednn": []}
    for round_ in range(2 + ARGS.reps):
        for backend in times:
            gemm.set_backend(backend)
            start = time.perf_counter()
            trainer.train_step()
            if round_ >= 2:
                times[backend].append(time.perf_counter() - start)
    medians = {b: statistics.median(t) for b, t in times.items()}
    print(f"{model}: step torch {medians['torch']:.3f} s, oneDNN {medians['onednn']:.3f} s, "
          f"oneDNN / torch {medians['onednn'] / medians['torch']:.2f}x")
    return {"model": model, "dropout": 0.5, **{f"{b}_step_s": m for b, m in medians.items()},
            "onednn_over_torch": medians["onednn"] / medians["torch"]}


def main() -> None:
    torch.set_num_threads(ARGS.threads)
    retain_freed_memory()
    if not gemm.set_backend("onednn"):
        sys.exit("gemm_backends: this build of torch has no oneDNN: nothing to compare")
    if ARGS.steps:
        result = json.loads(open(ARGS.out).read()) if os.path.exists(ARGS.out) else {}
        result["steps"] = [alternating_steps(model) for model in ARGS.models]
        gemm.set_backend(None)
        with open(ARGS.out, "w") as out:
            json.dump(result, out, indent=1)
        print(f"wrote {ARGS.out}")
        return
    rows = []
    for name, m, k, n, run in cases():
        seconds = {}
        for backend in ("onednn", "torch", "onednn", "torch"):
            gemm.set_backend(backend)
            seconds[backend] = min(seconds.get(backend, float("inf")), timed(run, ARGS.reps))
        gflop = 2 * m * k * n / 1e9
        rows.append({"product": name, "gflop": gflop,
                     **{f"{b}_ms": s * 1e3 for b, s in seconds.items()},
                     **{f"{b}_gflops": gflop / s for b, s in seconds.items()},
                     "torch_over_onednn": seconds["torch"] / seconds["onednn"]})
        print(f"{name:46s} torch {seconds['torch'] * 1e3:8.2f} ms "
              f"{gflop / seconds['torch']:5.0f} GFLOP/s | oneDNN {seconds['onednn'] * 1e3:8.2f} ms "
              f"{gflop / seconds['onednn']:5.0f} GFLOP/s | {rows[-1]['torch_over_onednn']:.2f}x")
    gemm.set_backend(None)
    result = json.loads(open(ARGS.out).read()) if os.path.exists(ARGS.out) else {}
    result.update({"threads": ARGS.threads, "reps": ARGS.reps, "processor": processor(),
                   "cpu_vendor": gemm._cpu_vendor(), "torch": torch.__version__,
                   "auto_uses_onednn": gemm.set_backend("auto"), "products": rows})
    os.makedirs(os.path.dirname(ARGS.out) or ".", exist_ok=True)
    with open(ARGS.out, "w") as out:
        json.dump(result, out, indent=1)
    print(f"wrote {ARGS.out}")


if __name__ == "__main__":
    main()
