"""Partition quality on the real SNAP graphs: METIS and the streaming methods against random.

For every graph in the repository's ``datasets/`` (facebook-combined, email-enron, ca-astroph), every
part count (default 2-64) and every method, records edge cut, replication factor, halo rows
(max per part), balance and partition time. Peers in the same run give the ratios: each
edge cut against random's, each vertex cut's replication factor against random edge
assignment's.

    python benchmarks/partition_quality.py [--parts 2,4,8,16,32,64] [--out FILE.json]
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

from partitioning import (CSRGraph, Partition, make_partitioner, part_summary,  # noqa: E402
                          replication_factor)

DATASETS = ROOT / "datasets"
GRAPHS = {
    "facebook-combined": "SNAP-facebook-combined/raw/facebook-combined.txt.gz",
    "email-enron": "SNAP-email-enron/raw/email-enron.txt.gz",
    "ca-astroph": "SNAP-ca-astroph/raw/astro-ph-cc1.txt.gz",
}
EDGE_CUT = ["random", "metis", "ldg", "fennel"]
VERTEX_CUT = ["libra", "hdrf"]


def load_snap(path: Path) -> CSRGraph:
    """SNAP edge list -> symmetric CSR without self loops or duplicates."""
    edges = np.loadtxt(path, dtype=np.int64, comments="#", ndmin=2)
    return CSRGraph.from_edge_index(edges[:, 0], edges[:, 1], int(edges.max()) + 1,
                                    symmetrize=True, remove_self_loops=True)


def random_edge_assignment(graph: CSRGraph, parts: int, seed: int) -> Partition:
    rng = np.random.default_rng(seed)
    return Partition(kind="vertex_cut", num_parts=parts, num_nodes=graph.num_nodes,
                     node_parts=rng.integers(0, parts, graph.num_nodes),
                     edge_parts=rng.integers(0, parts, graph.num_edges), method="random_edges")


def run(parts_list, seed: int) -> dict:
    make_partitioner("fennel", num_parts=2).fit(load_snap_small())  # compile numba kernels once
    results = []
    for name, graph in snap_graphs():
        print(f"{name}: {graph.num_nodes} nodes, {graph.num_edges} directed edges", flush=True)
        for parts in parts_list:
            rows = {}
            for method in EDGE_CUT + VERTEX_CUT:
                part = make_partitioner(method, num_parts=parts, seed=seed).fit(graph)
                s = part_summary(graph, part)
                rows[method] = {
                    "kind": s["kind"], "edge_cut": s["edge_cut"],
                    "edge_cut_fraction": s["edge_cut_fraction"],
                    "replication_factor": s["replication_factor"],
                    "halo_rows_max": int(np.max(s["halo_nodes"])),
                    "balance_nodes": s["balance_nodes"], "balance_edges": s["balance_edges"],
                    "time_s": s["time_s"], "peak_memory_bytes": s["peak_memory_bytes"],
                }
            rf_random_edges = replication_factor(graph, random_edge_assignment(graph, parts, seed))
            for method, row in rows.items():
                row["edge_cut_vs_random"] = row["edge_cut"] / max(rows["random"]["edge_cut"], 1)
                if row["kind"] == "vertex_cut":
                    row["replication_vs_random_edges"] = row["replication_factor"] / rf_random_edges
            results.append({"graph": name, "parts": parts, "num_nodes": graph.num_nodes,
                            "num_edges": graph.num_edges,
                            "random_edges_replication_factor": rf_random_edges,
                            "methods": rows})
            print(format_row(name, parts, rows, rf_random_edges), flush=True)
    return {"benchmark": "partition_quality", "seed": seed, "parts": parts_list,
            "results": results}


def snap_graphs():
    """Yield ``(name, CSRGraph)`` of every SNAP graph of ``GRAPHS`` that is present."""
    for name, rel in GRAPHS.items():
        path = DATASETS / rel
        if not path.exists():
            print(f"skip {name}: {path} not found", flush=True)
            continue
        yield name, load_snap(path)


def load_snap_small() -> CSRGraph:
    src = np.arange(10)
    return CSRGraph.from_edge_index(src, (src + 1) % 10, 10, symmetrize=True)


def format_row(name, parts, rows, rf_random) -> str:
    cuts = " ".join(f"{m} {rows[m]['edge_cut_vs_random']:.3f}" for m in EDGE_CUT[1:])
    rfs = " ".join(f"{m} {rows[m]['replication_factor']:.2f}" for m in VERTEX_CUT)
    return (f"  {name:<18} P={parts:<3} cut/random: {cuts} | RF: {rfs} "
            f"(random edges {rf_random:.2f}) | metis bal {rows['metis']['balance_nodes']:.2f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="2,4,8,16,32,64",
                        help="comma-separated part counts (default 2,4,8,16,32,64)")
    parser.add_argument("--seed", type=int, default=0, help="partitioner seed (default 0)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "partition_quality.json"),
                        help="JSON output (default benchmarks/partition_quality.json)")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    result = run([int(p) for p in args.parts.split(",")], args.seed)
    result["wall_s"] = time.perf_counter() - t0
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out} ({result['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
