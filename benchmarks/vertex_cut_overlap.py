"""What overlapping the exchanges hides, across two hosts: a Libra vertex cut and a METIS edge
cut with their exchanges overlapped and waited for at once, in turns.

A vertex cut's aggregation exchanges twice (masters' rows to their mirrors, partial sums back
to the masters); the products of the owned rows run while the first exchange travels and the
masters <- mirrors product while the second does, each testing its exchange between row
blocks so that MPI moves it (``gnnscale/graph/vertex_cut.py``). An edge cut's inner product
overlaps its one exchange the same way (``gnnscale/graph/aggregate.py``).
``HaloPlan.configure(overlap=False)`` waits for every exchange as soon as it is posted: the
same numbers, nothing hidden.

A virtual cluster of 2 hosts with one core each (``gnnscale.testing.cluster``; root), one rank
per host, only TCP between them; at each ``--rates`` link rate one job trains each partition
with overlap on and off in turns (3 epochs a turn, the first not counted, ``--rounds`` turns
each, the order alternating); medians of the training step and the evaluation pass. Command::

    flock /tmp/gnnscale-bench.lock python benchmarks/vertex_cut_overlap.py \\
        --rates none 10gbit 1gbit 100mbit --rounds 4 \\
        --out benchmarks/results/vertex_cut_overlap.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
VARIANTS = {"overlapped": True, "waited": False}


def rank_main(args) -> None:
    """One job: every partition, overlap on and off in turns; rank 0 writes ``--result``."""
    import torch

    from _workload import training_step_s
    from gnnscale.comm import init
    from gnnscale.engine import LocalProblem, Trainer
    from gnnscale.engine.vertex_cut_problem import broadcast_vertex_cut_problem
    from gnnscale.nn import GNN
    from partitioning import make_partitioner
    from tune_validation import load

    torch.set_num_threads(1)
    comm = init()
    data = load(args.dataset)
    trainers = {}
    for method in args.methods:
        partition = make_partitioner(method, num_parts=comm.size, seed=0).fit(data)
        problem = broadcast_vertex_cut_problem(data, partition, comm) \
            if partition.kind == "vertex_cut" else \
            LocalProblem.from_graph_data(data, partition.node_parts, comm)
        torch.manual_seed(0)
        model = GNN(args.model, data.num_features, 16, data.num_classes, num_layers=2)
        trainers[method] = Trainer(model, problem, comm, seed=0)
    variants = args.variants
    times = {(m, v): ([], []) for m in trainers for v in variants}
    for turn in range(args.rounds):
        for method, trainer in trainers.items():
            for variant in (variants if turn % 2 == 0 else variants[::-1]):
                trainer.problem.graph.halo_plan.configure(overlap=VARIANTS[variant])
                steps, evals = times[(method, variant)]
                for record in [trainer.run_epoch() for _ in range(3)][1:]:
                    steps.append(training_step_s(record.time))
                    evals.append(record.time["eval_s"])
    if comm.rank == 0:
        rows = [{"method": m, "variant": v, "step_s": float(np.median(s)),
                 "eval_s": float(np.median(e)), "steps_s": s, "evals_s": e}
                for (m, v), (s, e) in times.items()]
        Path(args.result).write_text(json.dumps(rows))


def run_job(cluster, env: dict, args, result: Path, mca: dict | None = None) -> list[dict]:
    """Run this file's rank main on the cluster's two hosts (one rank each) with ``args``'s
    dataset, model, methods and rounds, and Open MPI parameters ``mca``; its rows."""
    argv = cluster.mpirun_argv(
        1, env=env, extra=[x for k, v in (mca or {}).items() for x in ("--mca", k, str(v))]) + [
        sys.executable, __file__, "--rank-main", "--dataset", args.dataset,
        "--model", args.model, "--methods", *args.methods, "--rounds", str(args.rounds),
        "--variants", *args.variants, "--result", str(result)]
    done = cluster.run("node0", argv, cwd=REPO, env=env, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"{Path(sys.argv[0]).name}: a job failed:\n{done.stderr[-3000:]}")
    return json.loads(result.read_text())


def at_each_rate(rates: list, name: str):
    """A two-host cluster (one core each) and a scratch folder, the links shaped to each of
    ``rates`` in turn (``none``: unshaped), every rate checked before the cluster is made:
    yields ``(cluster, folder, rate)``; the cluster goes away after the last."""
    from gnnscale.testing.cluster import VirtualCluster, parse_rate

    for rate in rates:
        if rate != "none":
            parse_rate(rate)  # a rate that is not one fails here, before any cluster
    with VirtualCluster(hosts=2, cores_per_host=1, name=f"{name}{os.getpid()}") as cluster, \
            tempfile.TemporaryDirectory(prefix="gnnscale-vc-bench-") as folder:
        for rate in rates:
            for host in cluster.hosts:
                cluster.set_rate(host.name, None if rate == "none" else rate)
            yield cluster, Path(folder), rate


def job_env() -> dict:
    """The environment of a cluster job: one thread per rank, this interpreter's tools first."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
            "PATH": f"{Path(sys.prefix) / 'bin'}:{os.environ['PATH']}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", nargs="+", default=["none", "10gbit", "1gbit", "100mbit"])
    parser.add_argument("--dataset", default="rmat-18")
    parser.add_argument("--model", default="gcn", choices=["gcn", "sage"])
    parser.add_argument("--methods", nargs="+", default=["libra", "metis"])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--out", default=None)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_main:
        return rank_main(args)
    env = job_env()
    results = []
    for cluster, folder, rate in at_each_rate(args.rates, "vo"):
        rows = run_job(cluster, env, args, folder / f"{rate}.json")
        by = {(r["method"], r["variant"]): r for r in rows}
        for method in args.methods:
            on, off = by[(method, "overlapped")], by[(method, "waited")]
            results.append({"rate": rate, "dataset": args.dataset, "model": args.model,
                            "method": method, "overlapped": on, "waited": off,
                            "step_ratio": on["step_s"] / off["step_s"],
                            "eval_ratio": on["eval_s"] / off["eval_s"]})
            print(f"{rate:>8} {method:6s}: step {on['step_s'] * 1e3:7.1f} ms overlapped, "
                  f"{off['step_s'] * 1e3:7.1f} waited ({on['step_s'] / off['step_s']:.2f}x); "
                  f"evaluation {on['eval_s'] * 1e3:6.1f} / {off['eval_s'] * 1e3:6.1f} ms "
                  f"({on['eval_s'] / off['eval_s']:.2f}x)", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"rounds": args.rounds, "results": results},
                                             indent=1))


if __name__ == "__main__":
    main()
