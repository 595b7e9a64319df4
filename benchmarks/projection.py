"""Projected training-step time at 16-256 ranks on a cluster, from partitions computed here.

Two steps, each rerunnable (hold the benchmark lock around ``stats``, it is heavy)::

    flock /tmp/gnnscale-bench.lock python benchmarks/projection.py stats --scale 21 \
        --method kaminpar --balance nodes,edges --parts 16 32 64 128 256
    python benchmarks/projection.py project \
        --cost-model benchmarks/results/cost_model_here.json

``stats`` partitions R-MAT ``--scale`` (products-sized at 21: 2.1M nodes; 100 features,
47 classes like ogbn-products) into every part count and appends each partition's workload
(per part: nodes, inner and boundary edges, the part-to-part halo matrix) and quality to
``benchmarks/results/projection_stats.json``.

``project`` predicts one training step and one evaluation pass for each (method, parts) with
:func:`planning.cost_model.predict` on the assumed cluster (``ASSUMPTIONS``) and the
compute constants of ``--cost-model`` (calibrated on this host; shared-memory figures of a
dedicated node are assumed, see ``ASSUMPTIONS``), writes
``benchmarks/results/projection.json`` and a PNG of projected time and parallel efficiency
(relative to the smallest part count) against ranks, per method, and names the first rank
count at which communication dominates the step.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

STATS = REPO / "benchmarks" / "results" / "projection_stats.json"
OUT = REPO / "benchmarks" / "results" / "projection.json"
PNG = REPO / "benchmarks" / "results" / "projection.png"
ASSUMPTIONS = {
    "cores_per_host": 32, "ranks_per_host": 32, "cores_per_rank": 1,
    "network_latency_us": 2.0, "network_gbit_per_s": 100.0,
    "model": "gcn", "layers": 3, "hidden": 256,
    "features": 100, "classes": 47,
    # this 2-core host is shared by other jobs, so its shared-memory figures (ms per message)
    # measure its scheduler, not a node's memory: a dedicated node's are assumed instead
    "shm_alpha_s": 1e-6, "shm_beta_s_per_byte": 1e-10,
    "notes": "one rank per core, ranks placed on hosts in order; compute constants and the "
             "fixed cost per layer of one core calibrated on this host, cached and beyond "
             "the cache, with this host's last-level cache (32 MiB) shared by a host's 32 "
             "ranks (so every rank's rows come from memory at these sizes); shared-memory "
             "alltoallv within a host 1 us per message and 10 GB/s; every host link shared "
             "by its 32 ranks; hierarchical gradient allreduce",
}


def stats(args) -> None:
    from gnnscale.data import load_dataset
    from partitioning import make_partitioner
    from partitioning.metrics import part_summary
    from planning.workload import part_workload

    data = load_dataset("rmat", scale=args.scale, num_features=ASSUMPTIONS["features"],
                        num_classes=ASSUMPTIONS["classes"], seed=0)
    print(data.summary(), flush=True)
    result = json.loads(STATS.read_text()) if STATS.exists() else {"runs": []}
    from gnnscale.cli.arguments import balance_params

    params = balance_params(args.balance, args.method, "--method")
    label = args.method + (f" ({args.balance})" if args.balance else "")
    for parts in args.parts:
        t0 = time.perf_counter()
        partition = make_partitioner(args.method, num_parts=parts, seed=0, **params).fit(data)
        work = part_workload(data, partition)
        summary = part_summary(data, partition)
        row = {"scale": args.scale, "method": label, "parts": parts,
               "num_nodes": data.num_nodes, "num_edges": data.num_edges,
               "partition_time_s": partition.time_s,
               "edge_cut_fraction": summary["edge_cut_fraction"],
               "replication_factor": summary["replication_factor"],
               "balance_edges": summary["balance_edges"],
               "workload": {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                            for k, v in work.items()}}
        result["runs"] = [r for r in result["runs"] if (r["scale"], r["method"], r["parts"])
                          != (args.scale, label, parts)] + [row]
        STATS.write_text(json.dumps(result))
        print(f"{label} x {parts}: cut {summary['edge_cut_fraction']:.3f}, replication "
              f"{summary['replication_factor']:.2f} ({time.perf_counter() - t0:.0f} s)",
              flush=True)


def project(args) -> None:
    from planning.cost_model import Cluster, CostModel, ModelSpec, Network, predict

    costs = CostModel.load(args.cost_model)
    a = ASSUMPTIONS
    costs.shm_alpha, costs.shm_beta = a["shm_alpha_s"], a["shm_beta_s_per_byte"]
    cluster = Cluster(ranks_per_host=a["ranks_per_host"], cores_per_rank=a["cores_per_rank"],
                      network=Network(a["network_latency_us"] * 1e-6,
                                      a["network_gbit_per_s"] * 1e9 / 8))
    spec = ModelSpec.build(a["model"], a["features"], a["hidden"], a["classes"], a["layers"])
    rows = []
    for run in json.loads(STATS.read_text())["runs"]:
        work = {k: np.asarray(v) if isinstance(v, list) else v
                for k, v in run["workload"].items()}
        pred = predict(work, spec, cluster, costs)
        exposed = pred["exchange_exposed_s"] + pred["allreduce_exposed_s"]
        rows.append({k: run[k] for k in ("scale", "method", "parts", "edge_cut_fraction",
                                         "replication_factor", "balance_edges")}
                    | {"step_s": pred["step_s"], "eval_s": pred["eval_s"],
                       "communication_s": exposed, "bound": pred["bound"],
                       "imbalance": pred["imbalance"]})
    for row in rows:
        group = [r for r in rows if (r["scale"], r["method"]) == (row["scale"], row["method"])]
        first = min(group, key=lambda r: r["parts"])
        row["efficiency"] = first["step_s"] * first["parts"] / (row["step_s"] * row["parts"])
    dominates = {}
    for key in sorted({(r["scale"], r["method"]) for r in rows}):
        group = sorted((r for r in rows if (r["scale"], r["method"]) == key),
                       key=lambda r: r["parts"])
        comm = [r["parts"] for r in group if r["bound"] == "communication"]
        dominates[f"rmat-{key[0]} {key[1]}"] = comm[0] if comm else None
        for r in group:
            print(f"rmat-{r['scale']} {r['method']:<7} {r['parts']:>4} ranks: step "
                  f"{r['step_s'] * 1e3:8.1f} ms, communication {r['communication_s'] * 1e3:7.1f}"
                  f" ms ({r['bound']}), efficiency {r['efficiency']:.2f}")
    OUT.write_text(json.dumps({"assumptions": ASSUMPTIONS, "cost_model": costs.to_dict(),
                               "communication_dominates_from": dominates, "rows": rows},
                              indent=1))
    plot(rows, PNG)
    print(json.dumps(dominates))


def plot(rows, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for key in sorted({(r["scale"], r["method"]) for r in rows}):
        group = sorted((r for r in rows if (r["scale"], r["method"]) == key),
                       key=lambda r: r["parts"])
        ranks = [r["parts"] for r in group]
        label = f"R-MAT {key[0]}, {key[1]}"
        left.plot(ranks, [r["step_s"] for r in group], marker="o", label=label)
        right.plot(ranks, [r["efficiency"] for r in group], marker="o", label=label)
    left.set_yscale("log")
    left.set_ylabel("projected training step (s)")
    right.set_ylabel("parallel efficiency vs. fewest ranks")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("ranks (32 per host, 100 Gb/s, 2 us)")
        ax.grid(True, which="both", alpha=0.3)
    left.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    s = sub.add_parser("stats")
    s.add_argument("--scale", type=int, default=21)
    s.add_argument("--method", default="fennel")
    s.add_argument("--balance", default=None,
                   help="balance targets of the method (e.g. nodes,edges for kaminpar)")
    s.add_argument("--parts", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    p = sub.add_parser("project")
    p.add_argument("--cost-model", default=str(REPO / "benchmarks" / "results"
                                               / "cost_model_here.json"))
    args = parser.parse_args()
    stats(args) if args.step == "stats" else project(args)


if __name__ == "__main__":
    main()
