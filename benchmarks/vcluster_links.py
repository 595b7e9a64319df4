"""The virtual cluster's links and faults, measured: what docs/virtual-cluster.md quotes.

- Links: latency (half the median of 200 one-byte TCP round trips) and bandwidth (a bulk
  transfer) between node0 and node1, unshaped and shaped to each ``--rates`` value
  (:func:`gnnscale.testing.link_probe.measure`), and the rate single messages of 64 KiB to 4
  MiB reach when sent after 30 ms idle (:func:`gnnscale.testing.link_probe.messages`).
- Faults: Cora trained on 2 hosts x 2 ranks with a checkpoint every 2 epochs; after the first
  checkpoint, node1's link is taken down, node1's Open MPI daemon is killed, or one of node1's
  ranks is killed; recorded: seconds from the fault to the end of ``mpirun``, its exit code,
  and whether the output names node1 (tests/cluster/cluster_runs.fault_mid_training, the same
  run the tests make).

Needs root (network namespaces). Command::

    flock /tmp/gnnscale-bench.lock .venv/bin/python benchmarks/vcluster_links.py \\
        --out benchmarks/results/vcluster_links.json
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "cluster")]

from cluster_runs import fault_mid_training, kill_on  # noqa: E402

from gnnscale.testing.cluster import LOST_HOST_S, VirtualCluster  # noqa: E402
from gnnscale.testing.link_probe import measure, messages  # noqa: E402

#: single messages timed after an idle gap: what a shaped link's bucket passes at full speed
MESSAGE_SIZES = [64 << 10, 128 << 10, 384 << 10, 1 << 20, 4 << 20]


def links(cluster, rates: list[str], repeats: int) -> list[dict]:
    rows = []
    for rate in [None, *rates]:
        for host in cluster.hosts:
            cluster.set_rate(host.name, rate)
        size = 256 if rate is None else max(1, int(cluster.rates["node0"] / 8 * 2 / 2**20))
        runs = [measure(cluster, megabytes=size) for _ in range(repeats)]
        latency = sorted(r["latency_s"] for r in runs)[len(runs) // 2]
        bandwidth = sorted(r["bandwidth_Bps"] for r in runs)[len(runs) // 2]
        single = messages(cluster, MESSAGE_SIZES)
        rows.append({"rate": rate or "unshaped", "latency_us": latency * 1e6,
                     "gbit_per_s": bandwidth * 8 / 1e9, "megabytes": size, "repeats": repeats,
                     "message_gbit_per_s": {str(k): None if v is None else v * 8 / 1e9
                                            for k, v in single.items()}})
        print(f"{rows[-1]['rate']:>9s}  latency {latency * 1e6:6.1f} us  "
              f"{bandwidth * 8 / 1e9:8.3f} Gbit/s; one message after 30 ms idle: " + ", ".join(
                  f"{k >> 10} KiB " + ("-" if v is None else f"{v * 8 / 1e9:.3g}")
                  for k, v in single.items()), flush=True)
    for host in cluster.hosts:
        cluster.set_rate(host.name, None)
    return rows


def faults(cluster) -> list[dict]:
    cases = {"link down": lambda: cluster.link_down("node1"),
             "daemon killed": lambda: kill_on(cluster, "node1", b"prted"),
             "rank killed": lambda: kill_on(cluster, "node1", b"gnnscale\0train", first_only=True)}
    rows = []
    for name, fault in cases.items():
        with tempfile.TemporaryDirectory() as folder:
            ended, code, output, _ = fault_mid_training(cluster, Path(folder), fault)
        named = re.search(r"rank \d+ with PID \d+ on node node1", output)
        rows.append({"fault": name, "ended_after_s": ended, "exit_code": code,
                     "names_host": "node1" in output, "names_rank": bool(named)})
        print(f"{name:>14s}  ended after {ended:5.1f} s, exit {code}, host named "
              f"{rows[-1]['names_host']}, rank named {rows[-1]['names_rank']}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", nargs="*", default=["10gbit", "1gbit", "100mbit", "10mbit"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    with VirtualCluster(hosts=2) as cluster:
        result = {"machine": platform.node(), "lost_host_s": LOST_HOST_S,
                  "links": links(cluster, args.rates, args.repeats), "faults": faults(cluster)}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
