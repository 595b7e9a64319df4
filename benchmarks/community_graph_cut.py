"""Edge cut of a graph with communities (dcsbm, ogbn-products preset) beside R-MAT's.

Run from the repository root with the project's venv, under the benchmark lock:

    flock /tmp/gnnscale-bench.lock .venv/bin/python benchmarks/community_graph_cut.py

Two graphs of the same size: R-MAT at ``--rmat-scale`` (Graph500 parameters, edge factor
``--edge-factor``) and the degree-corrected stochastic block model with ogbn-products' figures
(:func:`gnnscale.data.dcsbm.generate_dcsbm`, ``preset="ogbn-products"``) with as many nodes
(its average degree, 50.5, is the preset's; the R-MAT edge factor is chosen to give about as
many edges after duplicates are removed). Each is partitioned by METIS (pymetis, node
balance, seed 0) into every ``--parts`` count; recorded per run: the edge cut (fraction of the
directed edges whose endpoints lie in different parts), the halo rows (partitioning.metrics:
rows each part receives per layer, in total and per node; METIS's communication volume), the
largest part's halo, the node balance and the time. ``--calibrate`` also partitions the
dcsbm graph at each listed mixing into 10 parts, the setting of the one published partition
figure of ogbn-products found (METIS, 10 parts, communication volume 2,108,759, i.e. 0.861
halo rows per node: github.com/dmlc/dgl/pull/3821), see docs/planning.md ("A graph that
partitions like real ones"). Results: benchmarks/results/community_graph_cut.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PUBLISHED_PRODUCTS_HALO_ROWS_10 = 2_108_759  # METIS, 10 parts, edge-cut objective


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rmat-scale", type=int, default=17,
                        help="R-MAT scale; the dcsbm graph gets the same 2**scale nodes")
    parser.add_argument("--edge-factor", type=int, default=29,
                        help="R-MAT edges generated per node (29: about the dcsbm graph's "
                             "50.5 per node after duplicates are dropped, at scale 17)")
    parser.add_argument("--parts", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    parser.add_argument("--calibrate", type=float, nargs="*",
                        default=[0.0, 0.01, 0.02, 0.05, 0.1],
                        help="mixings to partition into 10 parts against the published figure")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "community_graph_cut.json")
    return parser.parse_args(argv)


def graph_stats(data) -> dict:
    degree = np.diff(data.indptr)
    dst = np.repeat(np.arange(data.num_nodes), degree)
    return {"name": data.name, "num_nodes": int(data.num_nodes),
            "num_edges": int(data.num_edges), "mean_degree": float(degree.mean()),
            "max_degree": int(degree.max()), "isolated_nodes": int(np.sum(degree == 0)),
            "same_class_edges": float(np.mean(data.y[data.indices] == data.y[dst]))}


def cut_row(data, parts: int, seed: int) -> dict:
    """METIS into ``parts`` parts: edge cut, halo rows, balance, time."""
    from partitioning import make_partitioner
    from partitioning.metrics import edge_cut, halo_counts

    start = time.perf_counter()
    partition = make_partitioner("metis", num_parts=parts, seed=seed).fit(data)
    seconds = time.perf_counter() - start
    cut = edge_cut(data, partition)
    halo = halo_counts(data, partition)
    sizes = np.bincount(partition.node_parts, minlength=parts)
    return {"method": "metis", "parts": parts, "edge_cut": cut,
            "edge_cut_fraction": cut / data.num_edges, "halo_rows": int(halo.sum()),
            "halo_rows_per_node": float(halo.sum() / data.num_nodes),
            "max_part_halo": int(halo.max()), "node_balance": float(sizes.max() / sizes.mean()),
            "partition_s": seconds}


def main(argv=None) -> int:
    from gnnscale.data import generate_dcsbm, generate_rmat

    args = parse_args(argv)
    nodes = 1 << args.rmat_scale
    graphs = {
        "dcsbm": lambda mixing=None: generate_dcsbm(preset="ogbn-products", num_nodes=nodes,
                                                    mixing=mixing, num_features=1,
                                                    seed=args.seed),
        "rmat": lambda: generate_rmat(args.rmat_scale, edge_factor=args.edge_factor,
                                      num_features=1, num_classes=47, seed=args.seed),
    }
    result = {"command": " ".join(["benchmarks/community_graph_cut.py", *(argv or sys.argv[1:])]),
              "published_products_halo_rows_per_node_10_parts":
                  PUBLISHED_PRODUCTS_HALO_ROWS_10 / 2_449_029,
              "graphs": {}, "runs": [], "calibration": []}
    for name, make in graphs.items():
        start = time.perf_counter()
        data = make()
        stats = {**graph_stats(data), "generate_s": time.perf_counter() - start}
        result["graphs"][name] = stats
        print(json.dumps(stats), flush=True)
        for parts in args.parts:
            row = {"graph": name, **cut_row(data, parts, args.seed)}
            result["runs"].append(row)
            print(json.dumps(row), flush=True)
        del data
    for mixing in args.calibrate:
        data = graphs["dcsbm"](mixing)
        row = {"mixing": mixing, "same_class_edges": graph_stats(data)["same_class_edges"],
               **cut_row(data, 10, args.seed)}
        result["calibration"].append(row)
        print(json.dumps(row), flush=True)
        del data
    args.out.parent.mkdir(parents=True, exist_ok=True)
    temporary = args.out.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(result, indent=1) + "\n")
    temporary.replace(args.out)
    print(table(result))
    return 0


def table(result: dict) -> str:
    """The markdown table of docs/planning.md: both graphs' edge cut and halo rows per node."""
    rows = {(r["graph"], r["parts"]): r for r in result["runs"]}
    parts = sorted({p for _, p in rows})
    lines = ["| parts | dcsbm (products) edge cut | R-MAT edge cut | dcsbm halo rows / node "
             "| R-MAT halo rows / node |", "|---|---|---|---|---|"]
    for p in parts:
        d, r = rows.get(("dcsbm", p)), rows.get(("rmat", p))
        lines.append(f"| {p} | {d['edge_cut_fraction']:.1%} | {r['edge_cut_fraction']:.1%} | "
                     f"{d['halo_rows_per_node']:.2f} | {r['halo_rows_per_node']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
