"""Projected training-step time at 16-256 cores on a cluster, with the configuration the planner
chooses, from partitions computed here.

Three steps, each rerunnable (hold the benchmark lock around ``stats`` and ``wire``)::

    flock /tmp/gnnscale-bench.lock python benchmarks/projection.py stats --graph rmat \
        --scale 21 --method kaminpar --balance nodes,edges --parts 1 2 4 8 16 32 64 128 256
    flock /tmp/gnnscale-bench.lock python benchmarks/projection.py stats --graph dcsbm \
        --method kaminpar --balance nodes,edges --parts 1 2 4 8 16 32 64 128 256
    flock /tmp/gnnscale-bench.lock python benchmarks/projection.py wire
    python benchmarks/projection.py project \
        --cost-model benchmarks/results/cost_model_here.json

``cost_model_here.json`` is the median of three ``gnnscale tune --calibrate`` runs on this
host (``constants``)::

    for i in 1 2 3; do flock /tmp/gnnscale-bench.lock gnnscale tune --dataset tolokers \
        --data-root datasets --methods metis --parts 2 --calibrate --no-plot --out /tmp/cm$i; done
    python benchmarks/projection.py constants /tmp/cm1-cost-model.json \
        /tmp/cm2-cost-model.json /tmp/cm3-cost-model.json

``stats`` partitions R-MAT ``--scale`` (products-sized at 21: 2.1M nodes; 100 features,
47 classes like ogbn-products) or the dcsbm graph with ogbn-products' published figures at full
size (``--graph dcsbm``: 2.45M nodes, 123.7M directed edges) into every part count and appends
each partition's workload (per part: nodes, inner and boundary edges, the part-to-part halo
matrix), quality and host sharing (:func:`planning.workload.host_sharing` at 2 and 32 ranks per
host) to ``benchmarks/results/projection_stats.json``. ``wire`` measures the halo dtypes'
encoding and decoding against one elementwise op and keeps it in the same file.

``project`` lets the planner choose, for a job of every core count on hosts of 32 cores
(``ASSUMPTIONS``), among the partitions of every method at the rank count of each placement
(one rank per host, per socket, per core: :mod:`planning.placement`), the halo dtypes and the
staleness policies ``exact`` and ``pipelined`` (:func:`planning.tune.choose`: the most exact
configuration within 10% of the fastest), predicting each with
:func:`planning.cost_model.predict` and the compute constants of ``--cost-model`` (calibrated
on this host; shared-memory figures of a dedicated node are assumed, see ``ASSUMPTIONS``). It
writes ``benchmarks/results/projection.json`` (the chosen configuration per graph and core
count, one rank per core with float32 exact halos beside it, every candidate, and what a
host-aware exchange would save at the placements with several ranks per host) and a PNG of
projected step time and parallel efficiency (against 16 cores) per graph.
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
    "cores_per_host": 32, "sockets_per_host": 2,
    "network_latency_us": 2.0, "network_gbit_per_s": 100.0,
    "model": "gcn", "layers": 3, "hidden": 256,
    "features": 100, "classes": 47,
    # this 2-core host is shared by other jobs, so its shared-memory figures (ms per message)
    # measure its scheduler, not a node's memory: a dedicated node's are assumed instead
    "shm_alpha_s": 1e-6, "shm_beta_s_per_byte": 1e-10,
    "notes": "a job of 16-256 cores on hosts of 32 cores (2 sockets of 16): one rank per host "
             "(32 threads), per socket (16) or per core (1), ranks placed on hosts in order; "
             "compute constants and the fixed cost per layer calibrated on this host for 1 and "
             "2 threads, cached and beyond the cache, a rank of more threads scaled ideally "
             "from 2 (CostModel.constants_for), with the cache share fitted here "
             "(cost_model_here.json's cache_bytes) shared by a host's ranks; every part's reads "
             "spread over the rows it reads (no gather_share in the stored statistics); "
             "halo encoding and decoding measured here "
             "(projection.py wire); shared-memory alltoallv within a host 1 us per message and "
             "10 GB/s; every host link shared by its ranks; hierarchical gradient allreduce",
}


HOST_GROUPS = (2, 32)  # ranks per host whose host-sharing statistics ``stats`` keeps
DCSBM = {"preset": "ogbn-products", "scale": 1.0}  # the community graph: products-sized


def graph_label(run: dict) -> str:
    """``rmat-21``, ``rmat-22``, ``dcsbm-ogbn-products``: the graph a stats run partitioned."""
    return run.get("graph", f"rmat-{run['scale']}")


def load_graph(args):
    """R-MAT ``--scale`` or the dcsbm graph with ogbn-products' figures, seed 0."""
    from gnnscale.data import load_dataset

    if args.graph == "dcsbm":
        return "dcsbm-" + DCSBM["preset"], load_dataset("dcsbm", seed=0, **DCSBM)
    return f"rmat-{args.scale}", load_dataset(
        "rmat", scale=args.scale, num_features=ASSUMPTIONS["features"],
        num_classes=ASSUMPTIONS["classes"], seed=0)


def stats(args) -> None:
    from partitioning import make_partitioner
    from partitioning.metrics import part_summary
    from planning.workload import host_sharing, part_workload

    graph, data = load_graph(args)
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
        sharing = {str(g): {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                            for k, v in host_sharing(data, partition, g).items()}
                   for g in HOST_GROUPS if g < parts}
        row = {"graph": graph, "scale": args.scale if args.graph == "rmat" else None,
               "method": label, "parts": parts,
               "num_nodes": data.num_nodes, "num_edges": data.num_edges,
               "partition_time_s": partition.time_s,
               "edge_cut_fraction": summary["edge_cut_fraction"],
               "replication_factor": summary["replication_factor"],
               "balance_edges": summary["balance_edges"],
               "host_sharing": sharing,
               "workload": {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                            for k, v in work.items()}}
        result = json.loads(STATS.read_text()) if STATS.exists() else {"runs": []}
        result["runs"] = [r for r in result["runs"] if (graph_label(r), r["method"], r["parts"])
                          != (graph, label, parts)] + [row]
        STATS.write_text(json.dumps(result))
        saved = {g: 1 - sum(v["unique_rows"]) / max(1, sum(v["fetched_rows"]))
                 for g, v in sharing.items()}
        print(f"{graph} {label} x {parts}: cut {summary['edge_cut_fraction']:.3f}, replication "
              f"{summary['replication_factor']:.2f}, host-shared fraction of remote rows "
              f"{ {g: round(f, 3) for g, f in saved.items()} } "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)


def wire(args) -> None:
    """Encode and decode time per value of each halo dtype against one elementwise op
    (``torch.clamp_min``, what ``gnnscale tune --calibrate`` times for ``gamma_elem``) on the
    same values, one thread, rows beyond the cache: the coding cost the projection charges
    (:data:`planning.halo_wire.DEFAULT_CODING`), kept in the stats file's ``wire``."""
    import os

    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    from gnnscale.graph.quantize import WIRE_FORMATS

    rows = torch.randn(args.rows, args.width)
    out = torch.empty_like(rows)

    def median(fn, repeats=7):
        fn()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    elem = median(lambda: torch.clamp_min(rows, 0.0, out=out))
    half = rows.to(torch.bfloat16)
    result = {"rows": args.rows, "width": args.width, "elementwise_s": elem,
              "bfloat16": {"encode_elems": median(lambda: rows.to(torch.bfloat16)) / elem,
                           "decode_elems": median(lambda: half.to(torch.float32)) / elem}}
    for name, fmt in WIRE_FORMATS.items():
        packed = fmt.encode(rows, 1)
        result[name] = {
            "encode_elems": median(lambda: fmt.encode(rows, 1)) / elem,
            "decode_elems": median(lambda: fmt.decode(packed, (args.width,),
                                                      torch.float32)) / elem}
    for name, v in result.items():
        if isinstance(v, dict):
            print(f"{name}: encode {v['encode_elems']:.2f}, decode {v['decode_elems']:.2f} "
                  f"elementwise ops per value", flush=True)
    stats_file = json.loads(STATS.read_text()) if STATS.exists() else {"runs": []}
    stats_file["wire"] = result
    STATS.write_text(json.dumps(stats_file))


CORES = (16, 32, 64, 128, 256)
GRAPHS = ("rmat-21", "rmat-22", "dcsbm-ogbn-products")
HALO_DTYPES = ("float32", "bfloat16", "int8", "int4", "int2")
STALENESS = ("exact", "pipelined")  # what the projection offers the planner (see docs)


ROW_KEYS = ("graph", "cores", "method", "parts", "placement", "threads_per_rank", "halo_dtype",
            "staleness", "predicted_step_s", "predicted_eval_s", "predicted_epoch_s",
            "predicted_exchange_exposed_s", "predicted_allreduce_exposed_s", "bound",
            "predicted_halo_bytes_step_max")  # what projection.json keeps of every candidate


def _workload(run: dict) -> dict:
    return {k: np.asarray(v) if isinstance(v, list) else v for k, v in run["workload"].items()}


def host_aware(work: dict, sharing: dict | None) -> dict:
    """``work`` as if each host fetched each remote row once (``sharing``: the run's
    :func:`planning.workload.host_sharing` at its ranks per host): every rank's rows from other
    hosts scaled by its host's unique / fetched rows. Free sharing within the host: an upper
    bound on what a host-aware exchange saves."""
    if not sharing:
        return work
    recv = np.asarray(work["recv_rows"], dtype=np.float64)
    hosts = np.arange(recv.shape[0]) // sharing["ranks_per_host"]
    scale = np.asarray(sharing["unique_rows"], float) / np.maximum(
        1.0, np.asarray(sharing["fetched_rows"], float))
    remote = hosts[:, None] != hosts[None, :]
    return {**work, "recv_rows": np.where(remote, recv * scale[hosts][:, None], recv)}


def project(args) -> None:
    from planning.cost_model import CostModel, ModelSpec, Network
    from planning.halo_wire import DEFAULT_CODING, HaloOptions
    from planning.placement import placements
    from planning.tune import choose, predicted

    costs = CostModel.load(args.cost_model)
    a = ASSUMPTIONS
    costs.shm_alpha, costs.shm_beta = a["shm_alpha_s"], a["shm_beta_s_per_byte"]
    network = Network(a["network_latency_us"] * 1e-6, a["network_gbit_per_s"] * 1e9 / 8)
    spec = ModelSpec.build(a["model"], a["features"], a["hidden"], a["classes"], a["layers"])
    stats_file = json.loads(STATS.read_text())
    measured = stats_file.get("wire", {})
    coding = {**DEFAULT_CODING, **{d: (v["encode_elems"], v["decode_elems"])
                                   for d, v in measured.items() if isinstance(v, dict)}}
    halos = [HaloOptions(d, s, coding) for d in HALO_DTYPES for s in STALENESS]
    runs = {}
    for run in stats_file["runs"]:
        runs.setdefault(graph_label(run), {}).setdefault(run["parts"], []).append(run)
    rows, chosen, baseline, core_only, waiting = [], [], [], [], []
    for graph in GRAPHS:
        for cores in CORES:
            cands = []
            for place in placements(cores, a["cores_per_host"], a["sockets_per_host"]):
                cluster = place.cluster(network)
                for run in runs.get(graph, {}).get(place.ranks, []):
                    work = _workload(run)
                    base = {"graph": graph, "cores": cores, "method": run["method"],
                            "parts": run["parts"], "placement": place.name,
                            "placement_label": place.label,
                            "ranks_per_host": place.ranks_per_host,
                            "threads_per_rank": place.threads_per_rank,
                            "partition_time_s": run["partition_time_s"],
                            "edge_cut_fraction": run["edge_cut_fraction"],
                            "replication_factor": run["replication_factor"]}
                    cands.extend({**base, **predicted(work, spec, cluster, costs, halo)}
                                 for halo in halos)
            if not cands:
                continue
            best = choose(cands)
            plain = [r for r in cands if r["placement"] == "core"
                     and (r["halo_dtype"], r["staleness"]) == ("float32", "exact")]
            chosen.append(best)
            waiting.append(dict(choose([r for r in cands if r["staleness"] == "exact"])))
            per_core = [r for r in cands if r["placement"] == "core"]
            if per_core:
                core_only.append(dict(choose(per_core)))
            if plain:
                baseline.append(min(plain, key=lambda r: r["predicted_step_s"]))
            rows.extend(cands)
    for group in (chosen, baseline, core_only, waiting):
        for r in group:
            first = min((g for g in group if g["graph"] == r["graph"]),
                        key=lambda g: g["cores"])
            r["efficiency"] = first["predicted_step_s"] * first["cores"] / (
                r["predicted_step_s"] * r["cores"])
    sharing = host_sharing_report(runs, spec, costs, network, chosen, coding)
    for r in chosen:
        print(f"{r['graph']:<20} {r['cores']:>4} cores: {r['method']}, {r['placement_label']}, "
              f"{r['halo_dtype']}/{r['staleness']}: step {r['predicted_step_s'] * 1e3:8.1f} ms "
              f"({r['bound']}), efficiency {r['efficiency']:.2f}")
    for r in baseline:
        print(f"{r['graph']:<20} {r['cores']:>4} cores, one rank per core, float32, exact: "
              f"{r['method']}: step {r['predicted_step_s'] * 1e3:8.1f} ms, efficiency "
              f"{r['efficiency']:.2f}")
    OUT.write_text(json.dumps({"assumptions": ASSUMPTIONS, "cost_model": costs.to_dict(),
                               "coding_elems_per_value": coding,
                               "halo_dtypes": HALO_DTYPES, "staleness": STALENESS,
                               "chosen": chosen, "per_core_float32_exact": baseline,
                               "per_core_chosen": core_only, "exact_staleness_chosen": waiting,
                               "host_sharing": sharing,
                               "rows": [{k: r[k] for k in ROW_KEYS} for r in rows]}, indent=1))
    plot(chosen, baseline, PNG)


def host_sharing_report(runs, spec, costs, network, chosen, coding) -> list:
    """Per graph and part count: the fraction of the remote rows a host's ranks fetch that
    another rank of the host also fetches, at 2 ranks per host (one per socket) and 32 (one
    per core), and the step with the chosen halo setting with and without a host-aware
    exchange (free sharing within the host)."""
    from planning.halo_wire import HaloOptions
    from planning.placement import placements
    from planning.tune import predicted

    a = ASSUMPTIONS
    out = []
    for best in chosen:
        halo = HaloOptions(best["halo_dtype"], best["staleness"], coding)
        for place in placements(best["cores"], a["cores_per_host"], a["sockets_per_host"]):
            if place.ranks_per_host == 1:
                continue
            for run in runs.get(best["graph"], {}).get(place.ranks, []):
                shared = run.get("host_sharing", {}).get(str(place.ranks_per_host))
                if not shared:
                    continue
                work, cluster = _workload(run), place.cluster(network)
                fetched, unique = sum(shared["fetched_rows"]), sum(shared["unique_rows"])
                now = predicted(work, spec, cluster, costs, halo)["predicted_step_s"]
                aware = predicted(host_aware(work, shared), spec, cluster, costs, halo)
                out.append({"graph": best["graph"], "cores": best["cores"],
                            "method": run["method"], "placement": place.label,
                            "halo": f"{halo.dtype}/{halo.staleness.spec}",
                            "remote_rows_fetched": fetched, "remote_rows_unique": unique,
                            "shared_fraction": 1 - unique / fetched if fetched else 0.0,
                            "step_s": now, "host_aware_step_s": aware["predicted_step_s"],
                            "chosen_step_s": best["predicted_step_s"],
                            "chosen_placement": best["placement_label"]})
    return out


def plot(chosen, baseline, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6))
    names = {"rmat-21": "R-MAT 21", "rmat-22": "R-MAT 22",
             "dcsbm-ogbn-products": "dcsbm (ogbn-products)"}
    for i, graph in enumerate(g for g in GRAPHS if any(r["graph"] == g for r in chosen)):
        color = f"C{i}"
        for group, style, what in ((chosen, "-", "planner's choice"),
                                   (baseline, ":", "1 rank/core, float32, exact")):
            mine = sorted((r for r in group if r["graph"] == graph), key=lambda r: r["cores"])
            if not mine:
                continue
            cores = [r["cores"] for r in mine]
            label = f"{names.get(graph, graph)}: {what}"
            left.plot(cores, [r["predicted_step_s"] for r in mine], style, marker="o",
                      color=color, label=label)
            right.plot(cores, [r["efficiency"] for r in mine], style, marker="o", color=color,
                       label=label)
    left.set_yscale("log")
    left.set_ylabel("projected training step (s)")
    right.set_ylabel("parallel efficiency vs. 16 cores")
    right.axhline(0.5, color="grey", linewidth=0.8)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(CORES, [str(c) for c in CORES])
        ax.set_xlabel("cores (hosts of 32 cores, 2 sockets; 100 Gb/s, 2 us)")
        ax.grid(True, which="both", alpha=0.3)
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cell(r, halo=False) -> str:
    if not r:
        return "-"
    what = f"{r['method']}, {r['halo_dtype']}/{r['staleness']}" if halo else r["method"]
    return f"{r['predicted_step_s']:.3f}, {r['efficiency']:.2f} ({what})"


def table(args) -> None:
    """The docs/planning.md tables of ``projection.json``: the chosen configuration per graph
    and core count beside one rank per core with float32 exact halos, and host sharing."""
    result = json.loads(OUT.read_text())
    base = {(r["graph"], r["cores"]): r for r in result["per_core_float32_exact"]}
    core = {(r["graph"], r["cores"]): r for r in result["per_core_chosen"]}
    print("| graph | cores | partitioner | ranks x threads | halo | staleness | step (s) | "
          "exposed comm. (s) | efficiency | 1 rank/core, chosen halo: step (s), efficiency | "
          "1 rank/core, float32, exact: step (s), efficiency |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in result["chosen"]:
        b = base.get((r["graph"], r["cores"]))
        comm = r["predicted_exchange_exposed_s"] + r["predicted_allreduce_exposed_s"]
        print(f"| {r['graph']} | {r['cores']} | {r['method']} | {r['parts']} x "
              f"{r['threads_per_rank']} | {r['halo_dtype']} | {r['staleness']} | "
              f"{r['predicted_step_s']:.3f} | {comm:.3f} | {r['efficiency']:.2f} | "
              + _cell(core.get((r["graph"], r["cores"])), halo=True) + " | " + _cell(b) + " |")
    print()
    groups = [("chosen", "the planner's choice"),
              ("exact_staleness_chosen", "with exact halos in time (no staleness)"),
              ("per_core_chosen", "one rank per core"),
              ("per_core_float32_exact", "one rank per core, float32, exact")]
    print("| graph | " + " | ".join(f"efficiency at 256 cores: {what}" for _, what in groups)
          + " |")
    print("|---|" + "---|" * len(groups))
    for graph in dict.fromkeys(r["graph"] for r in result["chosen"]):
        cells = []
        for key, _ in groups:
            top = [r for r in result[key] if r["graph"] == graph and r["cores"] == max(CORES)]
            cells.append(f"{top[0]['efficiency']:.2f} ({top[0]['method']}, "
                         f"{top[0]['parts']} x {top[0]['threads_per_rank']}, "
                         f"{top[0]['halo_dtype']}/{top[0]['staleness']})" if top else "-")
        print(f"| {graph} | " + " | ".join(cells) + " |")
    print()
    print("| graph | cores | partitioner | placement | halo | remote rows fetched | fetched by "
          "another rank of the host too | step (s) | with a host-aware exchange (s) | "
          "chosen step (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for h in result["host_sharing"]:
        print(f"| {h['graph']} | {h['cores']} | {h['method']} | {h['placement']} | {h['halo']} | "
              f"{h['remote_rows_fetched']:,} | {h['shared_fraction']:.1%} | {h['step_s']:.3f} | "
              f"{h['host_aware_step_s']:.3f} | {h['chosen_step_s']:.3f} "
              f"({h['chosen_placement']}) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    s = sub.add_parser("stats")
    s.add_argument("--graph", choices=("rmat", "dcsbm"), default="rmat",
                   help="R-MAT --scale, or the dcsbm graph with ogbn-products' figures")
    s.add_argument("--scale", type=int, default=21)
    s.add_argument("--method", default="fennel")
    s.add_argument("--balance", default=None,
                   help="balance targets of the method (e.g. nodes,edges for kaminpar)")
    s.add_argument("--parts", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    w = sub.add_parser("wire")
    w.add_argument("--rows", type=int, default=1 << 19)
    w.add_argument("--width", type=int, default=64)
    p = sub.add_parser("project")
    p.add_argument("--cost-model", default=str(REPO / "benchmarks" / "results"
                                               / "cost_model_here.json"))
    sub.add_parser("table", help="print the docs/planning.md tables of projection.json")
    c = sub.add_parser("constants", help="the median of each constant over several "
                                         "`gnnscale tune --calibrate` files")
    c.add_argument("files", nargs="+")
    c.add_argument("--out", default=str(REPO / "benchmarks" / "results"
                                        / "cost_model_here.json"))
    args = parser.parse_args()
    {"stats": stats, "wire": wire, "project": project, "table": table,
     "constants": constants}[args.step](args)


def constants(args) -> None:
    """``--out``: the median of every constant over ``files`` (calibrations of this host,
    which scatter from one to the next on a shared machine: the cache share 10-64 MiB)."""
    from _host_constants import median_tree

    from planning.cost_model import CostModel

    merged = median_tree([json.loads(Path(f).read_text()) for f in args.files])
    CostModel.from_dict(merged)  # refuses a missing or negative constant
    Path(args.out).write_text(json.dumps(merged, indent=1) + "\n")
    print(f"wrote {args.out}: the median of {len(args.files)} calibrations")


if __name__ == "__main__":
    main()
