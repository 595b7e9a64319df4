"""A vertex cut's local sums inside the kernel against through temporaries, one job, in turns.

Each aggregation of a vertex cut (``gnnscale/graph/vertex_cut.py``) multiplies four blocks of
its edges (masters' and mirrors' rows into masters' and into mirrors' rows) and sums them in
pairs. The engine adds each pair's second product into the first's fresh result inside the
kernel (``add_to``): no temporary, and the rows of a block without non-zeros are skipped.
``through_temporaries`` below is the same aggregation, the same products overlapping the same
exchanges, with the pairs summed as plain tensors (``a.matmul(x) + b.matmul(y)``): the
reference the kernel's sums are timed against.

2 ranks, one core and one thread each, R-MAT 18 (128 random features, 16 classes) split by
Libra, a 2-layer model with hidden 16: each variant trains 3 epochs a turn (the first not
counted), ``--rounds`` turns each, alternating; medians of the training step and of the
evaluation pass. Command::

    flock /tmp/gnnscale-bench.lock mpirun -n 2 python benchmarks/vertex_cut_sums.py \\
        --models gcn sage --out benchmarks/results/vertex_cut_sums.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]


def through_temporaries():
    """``VertexCutAggregate``'s forward and backward with each pair of block products summed
    as two tensors (the reference)."""
    from gnnscale.graph.staleness import FEATURES, TO_OWNER

    def forward(ctx, owned, blocks, plan, policy, slot):
        oo, om, mo, mm = blocks
        ctx.state = (blocks, plan, policy, slot)
        handle = policy.start((slot, "fwd"), plan.sent_rows(owned), plan, reverse=False,
                              kind=FEATURES)
        progress = policy.progress(handle, plan)
        out = oo.matmul(owned, progress)
        partial = mo.matmul(owned, progress)
        mirror = policy.finish(handle, plan).to(owned.dtype)
        partial = partial + mm.matmul(mirror)
        handle = policy.start((slot, "sum"), partial, plan, reverse=True, kind=TO_OWNER)
        out = out + om.matmul(mirror, policy.progress(handle, plan))
        return plan.accumulate_into_owned(out, policy.finish(handle, plan))

    def backward(ctx, grad_out):
        (oo, om, mo, mm), plan, policy, slot = ctx.state
        if not ctx.needs_input_grad[0]:
            return None, None, None, None, None
        grad_out = grad_out.contiguous()
        handle = policy.start((slot, "bwd"), plan.sent_rows(grad_out), plan, reverse=False,
                              kind=TO_OWNER)
        progress = policy.progress(handle, plan)
        grad_owned = oo.matmul_transposed(grad_out, progress)
        grad_mirror = om.matmul_transposed(grad_out, progress)
        grad_mirror_partial = policy.finish(handle, plan).to(grad_out.dtype)
        grad_mirror = grad_mirror + mm.matmul_transposed(grad_mirror_partial)
        handle = policy.start((slot, "bwd_sum"), grad_mirror, plan, reverse=True,
                              kind=TO_OWNER)
        grad_owned = grad_owned + mo.matmul_transposed(grad_mirror_partial,
                                                       policy.progress(handle, plan))
        sent = policy.finish(handle, plan)
        return plan.accumulate_into_owned(grad_owned, sent), None, None, None, None

    return staticmethod(forward), staticmethod(backward)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="rmat-18")
    parser.add_argument("--models", nargs="+", default=["gcn"], choices=["gcn", "sage"])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import torch

    from _workload import training_step_s
    from gnnscale.comm import init
    from gnnscale.engine import Trainer
    from gnnscale.engine.vertex_cut_problem import broadcast_vertex_cut_problem
    from gnnscale.graph import vertex_cut
    from gnnscale.nn import GNN
    from partitioning import make_partitioner
    from tune_validation import load

    torch.set_num_threads(1)
    comm = init()
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cores[comm.rank % len(cores)]})
    data = load(args.dataset)
    partition = make_partitioner("libra", num_parts=comm.size, seed=0).fit(data) \
        if comm.rank == 0 else None
    problem = broadcast_vertex_cut_problem(data, partition, comm)
    in_kernel = (vertex_cut.VertexCutAggregate.forward, vertex_cut.VertexCutAggregate.backward)
    variants = {"in_kernel": tuple(staticmethod(f) for f in in_kernel),
                "through_temporaries": through_temporaries()}
    results = []
    for model in args.models:
        torch.manual_seed(0)
        trainer = Trainer(GNN(model, data.num_features, 16, data.num_classes, num_layers=2),
                          problem, comm, seed=0)
        trainer.run_epoch()
        steps = {name: [] for name in variants}
        evals = {name: [] for name in variants}
        for turn in range(args.rounds):
            for name in (list(variants) if turn % 2 == 0 else list(variants)[::-1]):
                (vertex_cut.VertexCutAggregate.forward,
                 vertex_cut.VertexCutAggregate.backward) = variants[name]
                records = [trainer.run_epoch() for _ in range(3)][1:]
                steps[name] += [training_step_s(r.time) for r in records]
                evals[name] += [r.time["eval_s"] for r in records]
        vertex_cut.VertexCutAggregate.forward, vertex_cut.VertexCutAggregate.backward = \
            variants["in_kernel"]
        row = {"dataset": args.dataset, "model": model, "ranks": comm.size,
               **{f"{name}_step_s": float(np.median(steps[name])) for name in variants},
               **{f"{name}_eval_s": float(np.median(evals[name])) for name in variants},
               "steps_s": steps, "evals_s": evals}
        row["step_ratio"] = row["in_kernel_step_s"] / row["through_temporaries_step_s"]
        row["eval_ratio"] = row["in_kernel_eval_s"] / row["through_temporaries_eval_s"]
        results.append(row)
        if comm.rank == 0:
            print(f"{args.dataset} {model}: step {row['in_kernel_step_s'] * 1e3:.1f} ms in the "
                  f"kernel, {row['through_temporaries_step_s'] * 1e3:.1f} through temporaries "
                  f"({row['step_ratio']:.3f}x); evaluation {row['in_kernel_eval_s'] * 1e3:.1f} "
                  f"/ {row['through_temporaries_eval_s'] * 1e3:.1f} ms "
                  f"({row['eval_ratio']:.3f}x)", flush=True)
    if comm.rank == 0 and args.out:
        Path(args.out).write_text(json.dumps({"rounds": args.rounds, "results": results},
                                             indent=1))


if __name__ == "__main__":
    main()
