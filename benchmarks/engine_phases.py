"""Where a training step's time goes, phase by phase, against this machine's rooflines.

Run from the repository root with the project's venv (one process, or one rank per process
under mpirun; every rank prints and records its own table, rank 0 adds them to the file). One
configuration per process: a step profiled after another model's run in the same process
can come out several times slower than it runs (seen with GCN without dropout after GCN with
it), so the tables of docs/performance.md come from

    for m in gcn sage; do for p in 0.5 0; do
      .venv/bin/python benchmarks/engine_phases.py --models $m --dropout $p
      mpirun -n 2 .venv/bin/python benchmarks/engine_phases.py --threads 1 --models $m --dropout $p
    done; done

and the same loop with ``--compute-dtype bfloat16`` for the bf16 tables.

Workload (docs/performance.md): a seeded R-MAT graph (scale 18: 262,144 nodes, 7.6M
directed edges after symmetrising), 128 random features, 16 classes, 2 layers of 256, Adam
(lr 0.01, weight decay 5e-4), full batch; several ranks split it with METIS (nodes+edges
balance) as ``gnnscale train`` does.

Phases and what each is charged with (the step runs under ``torch.profiler``; gnnscale's own
compiled kernels are wrapped in named regions, every other operator is classified by name):
  aggregation fwd / bwd  the compiled sparse x dense product (A @ X, and A^T @ G in backward);
                         bytes: the CSR arrays once, one source row per non-zero, the output
  dense transforms       aten mm/addmm/linear/matmul, forward and backward; flops 2*M*K*N
  dropout + ReLU         gnnscale's fused compiled dropout, both ways; bytes: input + output
                         (+ the saved output read in backward); where ReLU + dropout run
                         blocked with the next transform (``nn/fused_transform.py``), its mask
                         passes: the input read (and, backward, its gradient written; the
                         blocks themselves stay in cache), its products under dense transforms
  other elementwise      every other aten operator (bias, loss, masks, indexing, sums):
                         bytes: inputs + one output of the largest input's size (approximate)
  optimiser              Adam's step; bytes: 7 x 4 x parameters (p, g, m, v read; p, m, v written)
  halo pack + wait       packing sent rows and waiting for the exchange; bytes sent
  grad. allreduce        the exposed wait for the weight-gradient allreduce; bytes 4 x parameters
  evaluation             one forward pass in eval mode (the per-epoch evaluation)
  unattributed           step time minus the phases above (Python, autograd bookkeeping)
Each phase's achieved rate is shown as a fraction of the roofline measured right after it:
the best copy rate over 1 GiB arrays (read + write; NumPy one thread, torch with the run's
threads) for byte-bound phases, the best torch GEMM rate at the step's own GEMM shapes
(fp32, or bf16 with ``--compute-dtype bfloat16``) for the dense transforms; under mpirun
every rank measures at the same time (they share the
memory bus) and the lowest figure is the roofline. Above 100% means the phase's data partly
stays in cache (the 16-wide rows of the second layer fit in L2/L3). Times: median over ``--reps`` profiled steps
after ``--warmup`` unprofiled ones; the step time is also measured without the profiler.
Writes benchmarks/results/engine_phases.json.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import sys
import time
from pathlib import Path

from _workload import add_rmat_arguments, rmat_graph

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_rmat_arguments(parser)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--models", nargs="+", default=["gcn", "sage"], choices=["gcn", "sage"])
    parser.add_argument("--dropout", nargs="+", type=float, default=[0.5, 0.0])
    parser.add_argument("--threads", type=int, default=2, help="threads per rank")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--compute-dtype", default="float32", choices=["float32", "bfloat16"],
                        help="the trainer's compute_dtype; bfloat16 measures the GEMM roofline "
                             "in bf16 and is recorded under its own key")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/engine_phases.json"))
    return parser.parse_args(argv)


ARGS = parse_args()
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = str(ARGS.threads)
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from gnnscale.comm import init  # noqa: E402
from gnnscale.engine import LocalProblem, Trainer  # noqa: E402
from gnnscale.graph import halo as halo_module  # noqa: E402
from gnnscale.graph.sparse import SparseBlock  # noqa: E402
from gnnscale.nn import GNN  # noqa: E402
from gnnscale.nn import dropout as dropout_module  # noqa: E402
from gnnscale.nn import fused_transform  # noqa: E402
from rooflines import copy_bandwidth_gbs, gemm_gflops, timed  # noqa: E402

LR, WEIGHT_DECAY = 0.01, 5e-4
PHASES = ("aggregation fwd", "aggregation bwd", "dense transforms", "dropout + ReLU",
          "other elementwise", "optimiser", "halo pack + wait", "grad. allreduce",
          "unattributed")
#: torch's oneDNN product (gnnscale.nn.gemm: ``X @ W^T``, or with ``.binary`` ``+ other``)
ONEDNN_LINEAR = "mkldnn::_linear_pointwise"
DENSE_OPS = {"aten::mm", "aten::addmm", "aten::addmm_", "aten::linear", "aten::matmul",
             "aten::bmm", ONEDNN_LINEAR}
# the ones whose flops are counted
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::addmm_", ONEDNN_LINEAR)
REGION = "gnnscale."  # prefix of this benchmark's named regions


class Counter:
    """Bytes (and flops) charged to each named region, while a profiled step runs."""

    def __init__(self):
        self.bytes = {}
        self.active = False

    def add(self, phase: str, amount: float) -> None:
        if self.active:
            self.bytes[phase] = self.bytes.get(phase, 0.0) + amount


COUNTER = Counter()


def _region(name: str, fn, bytes_of):
    """``fn`` wrapped in a profiler region ``gnnscale.NAME``; ``bytes_of(args, result)`` is
    charged to the phase."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with torch.profiler.record_function(REGION + name):
            result = fn(*args, **kwargs)
        COUNTER.add(name, bytes_of(args, result))
        return result

    return wrapped


def _product_bytes(csr_attr: str):
    def bytes_of(args, result):
        block, dense = args[0], args[1]
        csr = getattr(block, csr_attr)
        return (csr.indptr.nbytes + csr.indices.nbytes + block.nnz * 4
                + block.nnz * dense.shape[1] * dense.element_size()
                + result.numel() * result.element_size())
    return bytes_of


def _nbytes(tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _dropout_forward_bytes(args, result):
    return _nbytes(args[1]) + _nbytes(result)  # x in, the result out (either may be bf16)


def _dropout_backward_bytes(args, result):
    ctx, grad = args[0], args[1]
    relu = ctx.params[3]
    # the output's gradient (and, fused with ReLU, the saved output) in, the input's out
    return (2 if relu else 1) * _nbytes(grad) + _nbytes(result[0])


def instrument() -> None:
    """Wrap gnnscale's compiled kernels and halo steps in named profiler regions."""
    SparseBlock.matmul = _region("aggregation fwd", SparseBlock.matmul,
                                 _product_bytes("_forward"))
    SparseBlock.matmul_transposed = _region("aggregation bwd", SparseBlock.matmul_transposed,
                                            _product_bytes("_transpose"))
    fn = dropout_module._Dropout
    fn.forward = staticmethod(_region("dropout + ReLU", fn.forward, _dropout_forward_bytes))
    fn.backward = staticmethod(_region("dropout + ReLU", fn.backward, _dropout_backward_bytes))
    # the blocked ReLU + dropout + transform: its mask passes here, its products are GEMMs
    fused_transform._activate = _region("dropout + ReLU", fused_transform._activate,
                                        lambda args, result: _nbytes(args[0]))  # h read
    fused_transform.relu_dropout_grad = _region(
        "dropout + ReLU", fused_transform.relu_dropout_grad,  # h read, its gradient written
        lambda args, result: 4 * (args[1].size + max(args[6].size, args[9].size)))
    plan = halo_module.HaloPlan
    for name in ("post_forward", "post_backward", "wait"):
        setattr(plan, name, _region("halo pack + wait", getattr(plan, name),
                                    lambda args, result: 0.0))


def classify(event) -> str | None:
    """The phase an operator event's self time belongs to (None: evaluation, not the step)."""
    names = []
    node = event
    while node is not None:
        names.append(node.name)
        node = node.cpu_parent
    if any(n == REGION + "evaluation" for n in names):
        return None
    if any(n.startswith("Optimizer.step") for n in names):
        return "optimiser"
    for name in names:  # innermost named region first
        if name.startswith(REGION):
            return name[len(REGION):]
    if any(n in DENSE_OPS for n in names):
        return "dense transforms"
    return "other elementwise"


def gemm_shape(event):
    """``(M, K, N)`` of an ``aten::mm`` / ``aten::addmm(_)`` / oneDNN linear event (None if
    not recorded): the product's two matrices, after ``addmm``'s added term and before an
    ``out=`` tensor; oneDNN's ``[M, K]`` input and ``[N, K]`` weight, after ``.binary``'s
    added term (that overload has five arguments, the plain one six)."""
    shapes = list(event.input_shapes or [])
    if event.name == ONEDNN_LINEAR:
        pair = shapes[0:3:2] if len(shapes) == 5 else shapes[0:2]
        if len(pair) != 2 or any(len(s) != 2 for s in pair):
            return None
        (m, k), (n, _) = pair
        return int(m), int(k), int(n)
    first = 0 if event.name == "aten::mm" else 1
    if len(shapes) < first + 2 or len(shapes[first]) != 2 or len(shapes[first + 1]) != 2:
        return None
    (m, k), (_, n) = shapes[first], shapes[first + 1]
    return int(m), int(k), int(n)


def gemm_flops(event) -> float:
    shape = gemm_shape(event)
    return 0.0 if shape is None else 2.0 * shape[0] * shape[1] * shape[2]


# Operators that make views or allocate without touching the data: no bytes moved.
NO_DATA_OPS = {"aten::view", "aten::t", "aten::transpose", "aten::expand", "aten::as_strided",
               "aten::reshape", "aten::_reshape_alias", "aten::empty", "aten::empty_like",
               "aten::empty_strided", "aten::detach", "aten::detach_", "aten::alias",
               "aten::slice", "aten::select", "aten::unsqueeze", "aten::squeeze",
               "aten::permute", "aten::resolve_conj", "aten::resolve_neg", "aten::lift_fresh",
               "aten::set_", "aten::resize_", "aten::result_type", "aten::is_nonzero",
               "aten::item", "aten::_local_scalar_dense", "aten::to", "aten::contiguous",
               "aten::numpy_T", "aten::from_blob", "aten::_unsafe_view"}


def elementwise_bytes(event) -> float:
    """Bytes of a leaf operator that touches data: its inputs plus one output the size of the
    largest (operators that call others are charged through their leaves)."""
    if event.name in NO_DATA_OPS or event.cpu_children:
        return 0.0
    sizes = [int(np.prod(s)) for s in (event.input_shapes or []) if s]
    if not sizes:
        return 0.0
    return 4.0 * (sum(sizes) + max(sizes))


def profiled_step(trainer) -> dict:
    """One training step and one evaluation pass under the profiler: seconds per phase."""
    from torch.profiler import ProfilerActivity, profile

    COUNTER.bytes, COUNTER.active = {}, True
    stats = trainer.problem.graph.halo_plan.stats
    stats.reset()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        start = time.perf_counter()
        _, timings = trainer.train_step()
        step_s = time.perf_counter() - start
        COUNTER.active = False  # the evaluation pass is timed, not charged to the step
        halo_bytes = stats.reset().halo_bytes_sent
        with torch.profiler.record_function(REGION + "evaluation"):
            start = time.perf_counter()
            trainer.predict()
            eval_s = time.perf_counter() - start
    seconds = dict.fromkeys(PHASES, 0.0)
    flops = 0.0
    other_bytes = 0.0
    shapes = set()
    for event in prof.events():
        phase = classify(event)
        if phase is None:
            continue
        seconds[phase] += event.self_cpu_time_total / 1e6
        if event.name in GEMM_OPS and phase == "dense transforms":
            flops += gemm_flops(event)
            shapes.add(gemm_shape(event))
        elif phase == "other elementwise" and event.name.startswith("aten::"):
            other_bytes += elementwise_bytes(event)
    seconds["grad. allreduce"] = timings.get("grad_allreduce_s", 0.0)
    seconds["unattributed"] = max(0.0, step_s - sum(seconds.values()))
    work = dict(COUNTER.bytes)
    work["halo pack + wait"] = float(halo_bytes)
    work["dense transforms"] = flops
    work["other elementwise"] = other_bytes
    return {"step_s": step_s, "eval_s": eval_s, "seconds": seconds, "work": work,
            "gemm_shapes": shapes - {None}}


def build(comm, data, node_parts, model: str, dropout: float):
    torch.manual_seed(ARGS.seed)
    net = GNN(model, ARGS.features, ARGS.hidden, ARGS.classes, num_layers=2, dropout=dropout)
    problem = LocalProblem.from_graph_data(data, node_parts, comm)
    return Trainer(net, problem, comm, lr=LR, weight_decay=WEIGHT_DECAY, seed=ARGS.seed,
                   compute_dtype=getattr(torch, ARGS.compute_dtype))


FAULT_FREE_LIMIT = 20000  # minor page faults (80 MiB): clean R-MAT 18 steps have a few hundred


def _minor_faults() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def profiled_steps(trainer, comm) -> tuple[list, int]:
    """``--reps`` profiled steps without page faults, and how many were dropped for them.

    The profiler's own allocations sometimes make the step's large tensors land on fresh
    pages (hundreds of thousands of minor faults, the step 1.5-2x slower, seen most without
    dropout); such steps measure the profiler, not the engine, so they are retried (at most
    ``4 x --reps`` attempts; if too few are clean, all are kept and the count says so). Under
    mpirun a step is clean when it is clean on every rank.
    """
    clean, dropped, attempts = [], [], 0
    while len(clean) < ARGS.reps and attempts < 4 * ARGS.reps:
        attempts += 1
        before = _minor_faults()
        run = profiled_step(trainer)
        # every rank keeps or drops the same steps: the largest count over the ranks decides
        run["minor_faults"] = int(comm.allreduce_scalar(_minor_faults() - before, "max"))
        (clean if run["minor_faults"] < FAULT_FREE_LIMIT else dropped).append(run)
    if len(clean) < ARGS.reps:
        return clean + dropped, len(dropped)
    return clean, len(dropped)


def rooflines_here(comm, shapes) -> dict:
    """Copy bandwidth and GEMM rate at the step's own GEMM shapes, measured by every rank at
    once (ranks share the memory bus); the lowest figure over the ranks is the roofline."""
    comm.barrier()
    dtype = getattr(torch, ARGS.compute_dtype)
    measured = comm.allgather_object({"copy_gbs": copy_bandwidth_gbs(),
                                      "gemm_gflops": gemm_gflops(sorted(shapes), dtype)})
    return {key: min(m[key] for m in measured) for key in measured[0]}


def measure(comm, data, node_parts, model: str, dropout: float) -> dict:
    trainer = build(comm, data, node_parts, model, dropout)
    params = sum(p.numel() for p in trainer.model.parameters())
    for _ in range(ARGS.warmup):
        trainer.train_step()
    plain = [timed(trainer.train_step) for _ in range(ARGS.reps)]
    runs, faulted = profiled_steps(trainer, comm)
    rooflines = rooflines_here(comm, set().union(*(r["gemm_shapes"] for r in runs)))
    median = {phase: statistics.median(r["seconds"][phase] for r in runs) for phase in PHASES}
    work = {phase: statistics.median(r["work"].get(phase, 0.0) for r in runs)
            for phase in PHASES}
    work["optimiser"] = 7 * 4 * params
    work["grad. allreduce"] = 4 * params if comm.size > 1 else 0.0
    rows = []
    for phase in PHASES:
        seconds, amount = median[phase], work.get(phase, 0.0)
        row = {"phase": phase, "seconds": seconds}
        if phase == "dense transforms":
            row["gflop"] = amount / 1e9
            if seconds > 0:
                row["rate"] = amount / seconds / 1e9
                row["roofline_fraction"] = row["rate"] / rooflines["gemm_gflops"]
        elif phase != "unattributed":
            row["gbytes"] = amount / 1e9
            if seconds > 0 and amount > 0:
                row["rate"] = amount / seconds / 1e9
                row["roofline_fraction"] = row["rate"] / rooflines["copy_gbs"]
        rows.append(row)
    return {"model": model, "dropout": dropout, "rank": comm.rank, "ranks": comm.size,
            "threads": ARGS.threads, "parameters": params, "rooflines": rooflines,
            "profiled_steps_dropped_for_page_faults": faulted,
            "profiled_steps_kept": len(runs),
            "step_s_median": statistics.median(plain),
            "profiled_step_s_median": statistics.median(r["step_s"] for r in runs),
            "evaluation_s_median": statistics.median(r["eval_s"] for r in runs),
            "phases": rows}


def print_table(result: dict) -> None:
    print(f"\n{result['model']} dropout {result['dropout']}  rank {result['rank']} of "
          f"{result['ranks']}  step {result['step_s_median'] * 1e3:.0f} ms (profiled "
          f"{result['profiled_step_s_median'] * 1e3:.0f} ms; "
          f"{result['profiled_steps_dropped_for_page_faults']} profiled steps dropped for page "
          f"faults)  evaluation {result['evaluation_s_median'] * 1e3:.0f} ms")
    roof = result["rooflines"]
    print(f"rooflines measured with it: copy {roof['copy_gbs']:.1f} GB/s, "
          f"{'fp32' if ARGS.compute_dtype == 'float32' else 'bf16'} GEMM "
          f"{roof['gemm_gflops']:.0f} GFLOP/s at the step's shapes ({result['threads']} "
          f"thread(s))")
    print(f"{'phase':<20}{'ms':>9}{'share':>8}{'work':>14}{'rate':>14}{'of roofline':>13}")
    total = result["profiled_step_s_median"]
    for row in result["phases"]:
        work = rate = fraction = ""
        if "gflop" in row:
            work, unit = f"{row['gflop']:.2f} GFLOP", "GFLOP/s"
        elif "gbytes" in row:
            work, unit = f"{row['gbytes']:.3f} GB", "GB/s"
        if "rate" in row:
            rate = f"{row['rate']:.1f} {unit}"
            fraction = f"{row['roofline_fraction']:.0%}"
        print(f"{row['phase']:<20}{row['seconds'] * 1e3:>9.1f}"
              f"{row['seconds'] / total:>8.0%}{work:>14}{rate:>14}{fraction:>13}")


def main() -> None:
    comm = init("auto")
    torch.set_num_threads(ARGS.threads)
    instrument()
    data = rmat_graph(ARGS)
    if comm.size > 1:
        from partitioning import make_partitioner

        node_parts = make_partitioner("metis", num_parts=comm.size, seed=ARGS.seed,
                                      balance=("nodes", "edges")).fit(data).node_parts
    else:
        node_parts = np.zeros(data.num_nodes, np.int64)
    results = []
    for model in ARGS.models:
        for dropout in ARGS.dropout:
            result = measure(comm, data, node_parts, model, dropout)
            results.append(result)
            for rank in range(comm.size):
                comm.barrier()
                if rank == comm.rank:
                    print_table(result)
                    sys.stdout.flush()
            comm.barrier()
    results = [r for rank_results in comm.allgather_object(results) for r in rank_results]
    if comm.rank == 0:
        out = Path(ARGS.out)
        report = json.loads(out.read_text()) if out.exists() else {}
        key = f"{comm.size} rank(s) x {ARGS.threads} thread(s), scale {ARGS.scale}" + (
            "" if ARGS.compute_dtype == "float32" else f", {ARGS.compute_dtype}")
        entry = report.setdefault(key, {"results": []})
        done = {(r["model"], r["dropout"]) for r in results}
        entry["results"] = [r for r in entry["results"]
                            if (r["model"], r["dropout"]) not in done] + results
        entry.setdefault("commands", {})
        for model, dropout in sorted(done):
            entry["commands"][f"{model} dropout {dropout}"] = {
                "command": " ".join(sys.argv), "loadavg_end": os.getloadavg()}
        out.write_text(json.dumps(report, indent=1) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
