"""Open MPI's TCP eager limit on slow links: exchanges just above it wait for a handshake.

Open MPI's TCP transport sends a message up to ``btl_tcp_eager_limit`` bytes (64 KiB by
default) at once; a larger one sends its first fragment and waits for the receiver's
acknowledgement before the rest. On a shaped link that acknowledgement queues behind the
peer's own data, so an exchange of some 70 KB each way (a vertex cut's on SNAP ca-AstroPh)
pays a round trip through both links' queues. Here the same jobs run with the default limit
and with ``--limit`` bytes, alternating, ``--repeats`` times each.

A virtual cluster of 2 hosts with one core each (``gnnscale.testing.cluster``; root), one rank
per host; each job trains every ``--methods`` partition in turns with its exchanges
overlapped (``benchmarks/vertex_cut_overlap.py``'s rank main). Command::

    flock /tmp/gnnscale-bench.lock python benchmarks/tcp_eager_limit.py \\
        --rates 100mbit 1gbit --out benchmarks/results/tcp_eager_limit.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", nargs="+", default=["100mbit", "1gbit"])
    parser.add_argument("--dataset", default="SNAP-ca-astroph")
    parser.add_argument("--model", default="gcn", choices=["gcn", "sage"])
    parser.add_argument("--methods", nargs="+", default=["libra", "random", "metis"])
    parser.add_argument("--limit", type=int, default=262144,
                        help="the eager limit set against the default (bytes)")
    parser.add_argument("--rounds", type=int, default=6, help="turns of 3 epochs per job")
    parser.add_argument("--repeats", type=int, default=2, help="jobs per limit and rate")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.limit < 1:
        parser.error(f"--limit must be a positive byte count, got {args.limit}")
    from vertex_cut_overlap import at_each_rate, job_env, run_job

    args.variants = ["overlapped"]
    env = job_env()
    limits = {"default": None, str(args.limit): args.limit}
    results = []
    for cluster, folder, rate in at_each_rate(args.rates, "el"):
        steps = {(m, k): [] for m in args.methods for k in limits}
        evals = {(m, k): [] for m in args.methods for k in limits}
        for repeat in range(args.repeats):
            for name in (list(limits) if repeat % 2 == 0 else list(limits)[::-1]):
                mca = {} if limits[name] is None else {"btl_tcp_eager_limit": limits[name]}
                for row in run_job(cluster, env, args, folder / f"{rate}-{name}.json", mca):
                    steps[(row["method"], name)] += row["steps_s"]
                    evals[(row["method"], name)] += row["evals_s"]
        for method in args.methods:
            row = {"rate": rate, "dataset": args.dataset, "model": args.model, "method": method}
            for name in limits:
                row[name] = {"step_s": float(np.median(steps[(method, name)])),
                             "eval_s": float(np.median(evals[(method, name)]))}
            default, raised = row["default"], row[str(args.limit)]
            row["step_ratio"] = raised["step_s"] / default["step_s"]
            results.append(row)
            print(f"{rate:>8} {method:8s}: step {default['step_s'] * 1e3:7.1f} ms at the "
                  f"default limit, {raised['step_s'] * 1e3:7.1f} at {args.limit} "
                  f"({row['step_ratio']:.2f}x); evaluation {default['eval_s'] * 1e3:6.1f} / "
                  f"{raised['eval_s'] * 1e3:6.1f} ms", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"limit": args.limit, "rounds": args.rounds,
                                              "repeats": args.repeats, "results": results},
                                             indent=1))


if __name__ == "__main__":
    main()
