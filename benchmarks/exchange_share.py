"""What the halo exchanges add to a training step on two hosts, per partitioner, against the
time model.

On a virtual cluster of 2 hosts with one core each and one rank per host
(``gnnscale.testing.cluster``; root), the links shaped to each ``--rates`` value in turn (one
job per value; repeat a value for another job), each rank trains every ``--methods``
partition of ``--dataset`` (2-layer ``--model``, hidden 16) two ways, in turns of 3 warm-up
and ``--steps`` timed steps, ``--rounds`` rounds, the order rotating:

- ``exchanged``: as the engine trains;
- ``local``: every halo exchange replaced by zeros of the rows it would receive, at once and
  with no traffic (the rows sent are still gathered, the products still computed).

The difference is what the exchanges add to the step (``share``: the posts, the bytes'
work on the ranks' cores, the waits). Each job also calibrates the time model's constants
(``calibrate_in_job``) and measures the work per byte exchanged at its rate
(``exchange_byte_work``, as ``tune_validation.py`` does), and the model predicts the step
with the exchanges (the link: latency from ``link_probe``, bandwidth from the shaping) and
without them (as it sees the ``local`` staleness policy: the rows gathered, nothing sent, no
rank waiting for another's halo, the gradient allreduce as before). A partitioner whose measured share exceeds its
predicted share by more than another's loses ground the model does not see: this splits a
mispredicted partitioner order into its compute and its exchanges.

Prints, per job and partition, the slowest rank's median step both ways and the share,
measured and predicted, then per rate the medians over the jobs; ``--out`` keeps them. The
small graph whose partitioner order the model gets wrong (4 jobs per rate, 6 min)::

    flock /tmp/gnnscale-bench.lock python benchmarks/exchange_share.py \\
        --dataset SNAP-ca-astroph --methods metis kaminpar random \\
        --rates none 10gbit none 10gbit none 10gbit none 10gbit --rounds 8 \\
        --out benchmarks/results/exchange_share_astroph.json
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

WAYS = ("exchanged", "local")
WARMUP = 3


class LocalExchanges:
    """Switches ``HaloPlan.post`` between the real exchange and one that returns zeros of
    the rows it would receive at once (``local = True``), kept per shape so that no step pays
    for allocating them."""

    def __init__(self):
        from gnnscale.graph.halo import HaloPlan

        self.local = False
        self.real = HaloPlan.post
        self._zeros = {}
        switch = self

        def post(plan, rows, send_counts, recv_counts, *, gradient=False):
            if not switch.local:
                return switch.real(plan, rows, send_counts, recv_counts, gradient=gradient)
            return switch.received(rows, recv_counts)

        HaloPlan.post = post

    def received(self, rows, recv_counts):
        """A completed exchange of zeros: ``sum(recv_counts)`` rows shaped like ``rows``."""
        import torch

        from gnnscale.comm.base import Work

        shape = (int(sum(recv_counts)), *rows.shape[1:])
        key = (shape, rows.dtype)
        if key not in self._zeros:
            self._zeros[key] = torch.zeros(shape, dtype=rows.dtype)
        return Work(result=self._zeros[key], test_fn=lambda: True)


def turns(methods: list, rounds: int) -> list[tuple[str, str]]:
    """``(method, way)`` in the order the job trains them: every pair once a round, the
    order rotating by one each round."""
    from step_breakdown import rotating

    return rotating([(m, w) for m in methods for w in WAYS], rounds)


def rank_main(args) -> None:
    """Both ranks: every partition's steps both ways; rank 0 writes the medians, the
    workloads and the job's constants."""
    import torch

    from gnnscale.cli.calibrate import calibrate_in_job, exchange_byte_work
    from gnnscale.comm import init
    from planning.workload import part_workload
    from step_breakdown import partition_trainers
    from tune_validation import link_work_megabytes, load

    torch.set_num_threads(1)
    switch = LocalExchanges()
    comm = init()
    data = load(args.dataset)
    trainers, partitions = partition_trainers(comm, data, args.methods, args.model)
    workloads = {m: part_workload(data, p) for m, p in partitions.items()} \
        if comm.rank == 0 else {}
    costs = calibrate_in_job(comm, 1, model=args.model)
    hosts = comm.allgather_object(socket.gethostname())
    per_byte = exchange_byte_work(comm, hosts, megabytes=link_work_megabytes(f"vc:{args.rate}"),
                                  repeats=15)
    steps = {pair: [] for pair in turns(args.methods, 1)}
    for method, way in turns(args.methods, args.rounds):
        switch.local = way == "local"
        trainer = trainers[method]
        for _ in range(WARMUP):
            trainer.train_step()
        for _ in range(args.steps):
            comm.barrier()
            start = time.perf_counter()
            trainer.train_step()
            steps[(method, way)].append(time.perf_counter() - start)
    switch.local = False
    medians = {f"{m} {w}": float(np.median(s)) for (m, w), s in steps.items()}
    everyone = comm.allgather_object(medians)
    if comm.rank == 0:
        Path(args.result).write_text(json.dumps({
            "constants": {**costs.to_dict(), "exchange_byte_s": per_byte},
            "workloads": workloads, "features": data.num_features,
            "classes": data.num_classes,
            "rows": [{"method": m, "way": w, "rank": rank, "step_s": per_rank[f"{m} {w}"]}
                     for m in args.methods for w in WAYS
                     for rank, per_rank in enumerate(everyone)]}, default=_plain))


def _plain(value):
    return value.tolist() if hasattr(value, "tolist") else str(value)


def predicted_shares(job: dict, link: dict, model: str) -> dict:
    """``method -> (step with the exchanges, step without them)`` predicted from a job's
    constants and workloads on ``link`` (``latency_s``, ``bandwidth_Bps``): two hosts of one
    rank and one core each; without the exchanges as the model sees the ``local`` staleness
    policy (the rows gathered, nothing sent, no rank waiting for another's halo; the gradient
    allreduce unchanged)."""
    from planning.cost_model import Cluster, CostModel, ModelSpec, Network, predict
    from planning.halo_wire import HaloOptions

    spec = ModelSpec.build(model, job["features"], 16, job["classes"])
    costs = CostModel.from_dict(job["constants"])
    linked = Cluster(ranks_per_host=1, cores_per_rank=1, host_cores=1,
                     network=Network(link["latency_s"], link["bandwidth_Bps"]))
    out = {}
    for method, raw in job["workloads"].items():
        work = {k: np.asarray(v) if isinstance(v, list) else v for k, v in raw.items()}
        out[method] = tuple(predict(work, spec, linked, costs, halo)["step_s"] for halo in
                            (HaloOptions(), HaloOptions(staleness="local")))
    return out


def measured_shares(rows: list) -> dict:
    """``method -> (exchanged, local)``: the slowest rank's median step each way."""
    out = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        out[method] = tuple(max(r["step_s"] for r in rows
                                if r["method"] == method and r["way"] == way) for way in WAYS)
    return out


def table(jobs: list) -> str:
    """Per job and partition: measured and predicted steps both ways and the shares (ms);
    then per rate, the medians over its jobs of the shares."""
    lines = [f"{'link':>8} {'partition':<9} {'measured: with':>15} {'local':>6} {'share':>6}"
             f" {'predicted: with':>16} {'local':>6} {'share':>6}"]
    by_rate = {}
    for job in jobs:
        for method, (m_with, m_local) in job["measured"].items():
            p_with, p_local = job["predicted"][method]
            lines.append(f"{job['rate']:>8} {method:<9} {m_with * 1e3:15.2f} "
                         f"{m_local * 1e3:6.2f} {(m_with - m_local) * 1e3:6.2f} "
                         f"{p_with * 1e3:16.2f} {p_local * 1e3:6.2f} "
                         f"{(p_with - p_local) * 1e3:6.2f}")
            by_rate.setdefault(job["rate"], {}).setdefault(method, []).append(
                (m_with - m_local, p_with - p_local))
    lines.append("median share over the jobs (ms): measured / predicted")
    for rate, methods in by_rate.items():
        lines.append(f"{rate:>8} " + "  ".join(
            f"{m} {np.median([s[0] for s in v]) * 1e3:.2f} / "
            f"{np.median([s[1] for s in v]) * 1e3:.2f}" for m, v in methods.items()))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    from step_breakdown import job_arguments, rank_job

    args = job_arguments(parser, ["metis", "kaminpar", "random"], rounds=8, steps=20,
                         extra=("--rate",))
    if args.rank_main:
        return rank_main(args)
    from tune_validation import probe_links
    from vertex_cut_overlap import at_each_rate, job_env

    env, jobs, links = job_env(), [], None
    for index, (cluster, folder, rate) in enumerate(at_each_rate(args.rates, "xs")):
        if links is None:  # the probe leaves the links unshaped: shape this job's again
            links = probe_links(cluster, list(dict.fromkeys(args.rates)))
            for host in cluster.hosts:
                cluster.set_rate(host.name, None if rate == "none" else rate)
        job = rank_job(cluster, env, __file__, folder / f"{index}.json", rate, args,
                       ("--rate", rate))
        link = links[f"vc:{rate}"]
        jobs.append({"rate": rate, "link": link, "constants": job["constants"],
                     "workloads": job["workloads"], "features": job["features"],
                     "classes": job["classes"], "rows": job["rows"],
                     "measured": measured_shares(job["rows"]),
                     "predicted": predicted_shares(job, link, args.model)})
    print(f"{args.dataset}, {args.model}, 2 hosts x 1 rank; the slowest rank's median step")
    print(table(jobs))
    if args.out:
        Path(args.out).write_text(json.dumps({
            "dataset": args.dataset, "model": args.model, "rounds": args.rounds,
            "steps": args.steps, "jobs": jobs}, indent=1, default=_plain))


if __name__ == "__main__":
    main()
