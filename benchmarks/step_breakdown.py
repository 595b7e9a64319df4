"""Where a training step's time goes on two hosts, per partitioner: the aggregation's kernels,
the exchange's posts, progress tests and waits, the gradients added back, and the rest.

On a virtual cluster of 2 hosts with one core each and one rank per host
(``gnnscale.testing.cluster``; root), the links shaped to each ``--rates`` value in turn (one
job per rate), each rank trains every ``--methods`` partition of ``--dataset`` (2-layer
``--model``, hidden 16), the partitions taking turns of 5 warm-up and ``--steps`` timed
steps, ``--rounds`` rounds. Timers wrap, for the job only:

- ``kernels``: ``SparseBlock.matmul`` and ``matmul_transposed`` (the inner and boundary
  blocks' products), less the progress tests they call between row blocks;
- ``tests``: those tests of the exchange in flight (``Work.test``: MPI progress);
- ``post``: ``HaloPlan.post`` (the rows' gather, ``pack``, and posting the alltoallv: MPI
  writes what fits to the socket there, on the rank's own thread);
- ``wait``: ``HaloPlan.wait`` (the exposed halo wait);
- ``accumulate``: the returned gradients added into their owned rows;
- ``rest``: the step less all of these (dense transforms, autograd, loss, optimiser, the
  gradient allreduce).

Prints, per rate, partition and rank, each part's mean over the steps between the 10th and
90th percentile of the step time (the parts add up to the step) and writes them to ``--out``.
The small graph whose partitioner order the time model gets wrong at 10 Gbit/s, each rate
twice (1 min)::

    flock /tmp/gnnscale-bench.lock python benchmarks/step_breakdown.py \\
        --dataset SNAP-ca-astroph --methods kaminpar metis random \\
        --rates none 10gbit none 10gbit --rounds 8 \\
        --out benchmarks/results/step_breakdown_astroph.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

PARTS = ("kernels", "tests", "post", "pack", "wait", "accumulate")
WARMUP = 5


class Timers:
    """Seconds spent in the wrapped calls since the last ``clear``."""

    def __init__(self):
        self.seconds = defaultdict(float)

    def clear(self):
        self.seconds.clear()

    def wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
        return timed

    def wrap_kernel(self, fn):
        """A sparse product, its ``progress`` callback timed as ``tests``."""
        def timed(block, dense, progress=None, add_to=None):
            if progress is not None:
                progress = self.wrap("tests", progress)
            start = time.perf_counter()
            try:
                return fn(block, dense, progress, add_to)
            finally:
                self.seconds["products"] += time.perf_counter() - start
        return timed


def instrument() -> Timers:
    """Wrap the engine's kernels and exchange calls in this process with timers."""
    from gnnscale.graph.halo import HaloPlan
    from gnnscale.graph.sparse import SparseBlock

    timers = Timers()
    SparseBlock.matmul = timers.wrap_kernel(SparseBlock.matmul)
    SparseBlock.matmul_transposed = timers.wrap_kernel(SparseBlock.matmul_transposed)
    HaloPlan.post = timers.wrap("post", HaloPlan.post)
    HaloPlan.sent_rows = timers.wrap("pack", HaloPlan.sent_rows)
    HaloPlan.wait = timers.wrap("wait", HaloPlan.wait)
    HaloPlan.accumulate_into_owned = timers.wrap("accumulate",
                                                 HaloPlan.accumulate_into_owned)
    return timers


def middle_means(samples: dict) -> dict:
    """Each part's mean over the steps whose time lies between the 10th and 90th percentile
    of the steps (so that the parts add up to the step, and the steps a noisy host stalled do
    not count)."""
    import numpy as np

    steps = np.asarray(samples["step"])
    low, high = np.percentile(steps, [10, 90])
    kept = (steps >= low) & (steps <= high)
    return {k: float(np.asarray(v)[kept].mean()) for k, v in samples.items()}


def partition_trainers(comm, data, methods: list, model: str) -> tuple[dict, dict]:
    """Collective: ``(trainers, partitions)`` per method, the graph split over the job's ranks
    by rank 0 (seed 0) and a 2-layer ``model`` (hidden 16, seed 0) on each part; the
    partitions on rank 0 only (None elsewhere)."""
    import numpy as np
    import torch

    from gnnscale.engine import LocalProblem, Trainer
    from gnnscale.nn import GNN
    from partitioning import make_partitioner

    trainers, partitions = {}, {}
    for method in methods:
        partition = make_partitioner(method, num_parts=comm.size, seed=0).fit(data) \
            if comm.rank == 0 else None
        parts = torch.from_numpy(partition.node_parts.astype(np.int64)) if comm.rank == 0 \
            else torch.empty(data.num_nodes, dtype=torch.int64)
        problem = LocalProblem.from_graph_data(data, comm.broadcast(parts, root=0).numpy(),
                                               comm)
        torch.manual_seed(0)
        trainers[method] = Trainer(GNN(model, data.num_features, 16, data.num_classes,
                                       num_layers=2), problem, comm, seed=0)
        partitions[method] = partition
    return trainers, partitions


def rotating(items: list, rounds: int) -> list:
    """``items`` once a round for ``rounds`` rounds, the order rotating by one each round (so
    that the host's drift within a job weighs on each alike)."""
    return [item for r in range(rounds)
            for item in items[r % len(items):] + items[:r % len(items)]]


def rank_main(args) -> None:
    """Both ranks: every partition's steps, timed by part; rank 0 writes the medians."""
    import torch

    from gnnscale.comm import init
    from tune_validation import load

    torch.set_num_threads(1)
    timers = instrument()
    comm = init()
    data = load(args.dataset)
    trainers, _ = partition_trainers(comm, data, args.methods, args.model)
    samples = {m: defaultdict(list) for m in args.methods}
    for method in rotating(args.methods, args.rounds):
        trainer = trainers[method]
        for _ in range(WARMUP):
            trainer.train_step()
        for _ in range(args.steps):
            timers.clear()
            comm.barrier()
            start = time.perf_counter()
            trainer.train_step()
            step = time.perf_counter() - start
            got = dict(timers.seconds)
            got["kernels"] = got.get("products", 0.0) - got.get("tests", 0.0)
            got["step"] = step
            got["rest"] = step - sum(got.get(k, 0.0) for k in PARTS if k != "pack")
            for key in ("step", "rest", *PARTS):
                samples[method][key].append(got.get(key, 0.0))
    everyone = comm.allgather_object({m: middle_means(s) for m, s in samples.items()})
    if comm.rank == 0:
        Path(args.result).write_text(json.dumps(
            [{"method": m, "rank": rank, **per_rank[m]}
             for m in args.methods for rank, per_rank in enumerate(everyone)]))


def job_arguments(parser, methods: list, rounds: int, steps: int, extra=()):
    """Parse a two-host job benchmark's options (``--dataset``, ``--model``, ``--methods``,
    ``--rates``, ``--rounds``, ``--steps``, ``--out`` and the ranks' hidden ones; ``extra``:
    more hidden options); ``--rounds`` or ``--steps`` under 1 is a usage error."""
    parser.add_argument("--dataset", default="SNAP-ca-astroph")
    parser.add_argument("--model", default="gcn", choices=["gcn", "sage"])
    parser.add_argument("--methods", nargs="+", default=methods)
    parser.add_argument("--rates", nargs="+", default=["none", "10gbit"])
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--steps", type=int, default=steps, help="timed steps per turn")
    parser.add_argument("--out", default=None)
    for hidden in ("--result", *extra):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    parser.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.rank_main and (args.rounds < 1 or args.steps < 1):
        parser.error(f"--rounds and --steps must be 1 or more, got {args.rounds} and "
                     f"{args.steps}")
    return args


def rank_job(cluster, env: dict, script: str, result: Path, rate: str, args,
             extra: tuple = ()):
    """Run ``script --rank-main`` as a job of one rank per host of ``cluster`` with ``args``'
    dataset, model, methods, rounds and steps (and ``extra`` options); returns what it wrote
    to ``result``. A failed job exits with its error."""
    argv = cluster.mpirun_argv(1, env=env) + [
        sys.executable, script, "--rank-main", "--result", str(result),
        "--dataset", args.dataset, "--model", args.model, "--methods", *args.methods,
        "--rounds", str(args.rounds), "--steps", str(args.steps), *extra]
    done = cluster.run("node0", argv, cwd=REPO, env=env, timeout=1200)
    if done.returncode != 0:
        sys.exit(f"{Path(sys.argv[0]).name}: the job at {rate} failed:\n"
                 f"{done.stderr[-3000:]}")
    return json.loads(result.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args = job_arguments(parser, ["kaminpar", "metis", "random"], rounds=6, steps=40)
    if args.rank_main:
        return rank_main(args)
    from vertex_cut_overlap import at_each_rate, job_env

    env, rows = job_env(), []
    for cluster, folder, rate in at_each_rate(args.rates, "sb"):
        rows += [{"rate": rate, **row} for row in
                 rank_job(cluster, env, __file__, folder / f"{rate}.json", rate, args)]
    print(f"{args.dataset}, {args.model}, 2 hosts x 1 rank; mean per step (the middle 80% of "
          "steps), ms")
    print(f"{'link':>8} {'partition':<9} {'rank':>4} {'step':>7} {'kernels':>8} {'tests':>6} "
          f"{'post':>6} {'(pack)':>7} {'wait':>6} {'accum.':>7} {'rest':>7}")
    for row in rows:
        print(f"{row['rate']:>8} {row['method']:<9} {row['rank']:>4} "
              + " ".join(f"{row[k] * 1e3:{w}.3f}" for k, w in
                         (("step", 7), ("kernels", 8), ("tests", 6), ("post", 6),
                          ("pack", 7), ("wait", 6), ("accumulate", 7), ("rest", 7))))
    if args.out:
        Path(args.out).write_text(json.dumps({"dataset": args.dataset, "model": args.model,
                                              "rounds": args.rounds, "steps": args.steps,
                                              "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
