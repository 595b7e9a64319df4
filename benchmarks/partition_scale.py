"""Partition a Graph500-style R-MAT graph into many parts with the streaming partitioners.

Default: scale 22 (4,194,304 nodes), edge factor 16 (67M generated edges, about 128M directed
CSR entries after symmetrising), 256 parts, methods ldg, fennel, libra, hdrf (add METIS with
``--metis``). The graph is generated once (``gnnscale.data.generate_rmat``) and saved as .npy;
every method then runs in its own subprocess, so its peak resident memory (``ru_maxrss``,
graph included) and wall time are its own. The JSON records, per method: partition time,
traced peak (``Partition.peak_memory_bytes``), process peak RSS, edge cut / replication factor
and balance; random partitioning runs as the peer for the ratios.

    python benchmarks/partition_scale.py [--scale 22] [--parts 256] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def generate(scale: int, edge_factor: int, seed: int, workdir: Path) -> dict:
    """Generate the R-MAT graph and save its CSR arrays; return its statistics."""
    from gnnscale.data import generate_rmat

    t0 = time.perf_counter()
    data = generate_rmat(scale, edge_factor=edge_factor, seed=seed, num_features=1,
                         num_classes=2)
    np.save(workdir / "indptr.npy", np.asarray(data.indptr, dtype=np.int64))
    np.save(workdir / "indices.npy", np.asarray(data.indices, dtype=np.int64))
    degree = np.diff(data.indptr)
    return {"scale": scale, "edge_factor": edge_factor, "num_nodes": data.num_nodes,
            "num_edges": data.num_edges, "isolated_nodes": int(np.count_nonzero(degree == 0)),
            "max_degree": int(degree.max()), "generate_s": time.perf_counter() - t0,
            "graph_bytes": int(data.indptr.nbytes + data.indices.nbytes)}


def light_metrics(graph, partition) -> dict:
    """Edge cut or replication factor and balance without part_summary's O(E) sparse matrix."""
    parts = partition.num_parts
    out = {"balance_nodes": float(np.bincount(partition.node_parts, minlength=parts).max()
                                  / (graph.num_nodes / parts))}
    if partition.kind == "edge_cut":
        dst_parts = np.repeat(partition.node_parts, np.diff(graph.indptr))
        cut = int(np.count_nonzero(partition.node_parts[graph.indices] != dst_parts))
        out.update(edge_cut=cut, edge_cut_fraction=cut / graph.num_edges)
        edges = np.bincount(partition.node_parts, weights=np.diff(graph.indptr), minlength=parts)
    else:
        # distinct (node, part) pairs over edge endpoints and masters, sorted in place
        e, n = graph.num_edges, graph.num_nodes
        keys = np.empty(2 * e + n, dtype=np.int64)
        np.multiply(graph.indices, parts, out=keys[:e])
        keys[e:2 * e] = np.repeat(np.arange(n, dtype=np.int64) * parts, np.diff(graph.indptr))
        keys[:e] += partition.edge_parts
        keys[e:2 * e] += partition.edge_parts
        keys[2 * e:] = np.arange(n, dtype=np.int64) * parts + partition.node_parts
        keys.sort()
        distinct = 1 + int(np.count_nonzero(keys[1:] != keys[:-1]))
        del keys
        out["replication_factor"] = float(distinct / n)
        edges = np.bincount(partition.edge_parts, minlength=parts)
    out["balance_edges"] = float(edges.max() / edges.mean())
    return out


def worker(method: str, graph_dir: Path, parts: int, seed: int) -> dict:
    """Run one partitioner on the saved graph (in its own process) and measure it."""
    from partitioning import CSRGraph, make_partitioner

    graph = CSRGraph(np.load(graph_dir / "indptr.npy"), np.load(graph_dir / "indices.npy"))
    rss_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    partitioner = make_partitioner(method, num_parts=parts, seed=seed)
    t0 = time.perf_counter()
    partition = partitioner.fit(graph)
    wall = time.perf_counter() - t0
    rss_fit = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"method": method, "parts": parts, "kind": partition.kind,
            "time_s": partition.time_s, "wall_s": wall,
            "traced_peak_bytes": partition.peak_memory_bytes,
            "rss_after_load_bytes": rss_loaded, "peak_rss_bytes": rss_fit,
            **light_metrics(graph, partition)}


def run_method(method, graph_dir, parts, seed, timeout) -> dict:
    cmd = [sys.executable, __file__, "--worker", method, "--graph-dir", str(graph_dir),
           "--parts", str(parts), "--seed", str(seed)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"method": method, "parts": parts, "error": f"timed out after {timeout} s"}
    if proc.returncode != 0:
        return {"method": method, "parts": parts,
                "error": f"exit {proc.returncode}: {proc.stderr.strip()[-500:]}"}
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["process_s"] = time.perf_counter() - t0  # includes loading the graph and numba startup
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=22, help="log2 of nodes (default 22)")
    parser.add_argument("--edge-factor", type=int, default=16,
                        help="generated edges per node (default 16, Graph500)")
    parser.add_argument("--parts", type=int, default=256, help="number of parts (default 256)")
    parser.add_argument("--methods", default="random,ldg,fennel,libra,hdrf",
                        help="comma-separated partitioners (default random,ldg,fennel,libra,hdrf)")
    parser.add_argument("--metis", action="store_true", help="also run METIS (default off)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    parser.add_argument("--timeout", type=int, default=1800,
                        help="seconds per method (default 1800)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "partition_scale.json"),
                        help="JSON output (default benchmarks/partition_scale.json)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--graph-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, Path(args.graph_dir), args.parts, args.seed)))
        return 0
    methods = [m for m in args.methods.split(",") if m] + (["metis"] if args.metis else [])
    with tempfile.TemporaryDirectory(prefix="rmat-", dir=os.environ.get("TMPDIR")) as tmp:
        graph = generate(args.scale, args.edge_factor, args.seed, Path(tmp))
        print(f"R-MAT scale {args.scale}: {graph['num_nodes']:,} nodes, {graph['num_edges']:,} "
              f"directed edges, generated in {graph['generate_s']:.0f} s", flush=True)
        rows = []
        for method in methods:
            row = run_method(method, Path(tmp), args.parts, args.seed, args.timeout)
            rows.append(row)
            if "error" in row:
                print(f"  {method:<7} FAILED: {row['error']}", flush=True)
                continue
            quality = (f"cut {100 * row['edge_cut_fraction']:.1f}%" if "edge_cut" in row
                       else f"replication {row['replication_factor']:.2f}")
            print(f"  {method:<7} {row['time_s']:8.1f} s  peak RSS "
                  f"{row['peak_rss_bytes'] / 2**30:5.2f} GiB  {quality}  balance nodes "
                  f"{row['balance_nodes']:.3f} edges {row['balance_edges']:.3f}", flush=True)
    random_cut = next((r.get("edge_cut") for r in rows if r["method"] == "random"), None)
    for row in rows:
        if random_cut and "edge_cut" in row:
            row["edge_cut_vs_random"] = row["edge_cut"] / random_cut
    result = {"benchmark": "partition_scale", "graph": graph, "parts": args.parts,
              "cpu_count": os.cpu_count(), "rows": rows}
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
