"""KaMinPar at large part counts against METIS: time, halo rows, edge cut, balance, peak memory.

Run from the repository root with the project's venv, one step at a time (each under the
benchmark lock):

    .venv/bin/python benchmarks/kaminpar_scale.py --step rmat18   # R-MAT 18 -> 256 parts
    .venv/bin/python benchmarks/kaminpar_scale.py --step rmat22   # R-MAT 22 -> 256, KaMinPar
    .venv/bin/python benchmarks/kaminpar_scale.py --step rmat22-store
    .venv/bin/python benchmarks/kaminpar_scale.py --step snap     # SNAP graphs, 8 and 64 parts

Steps:
  rmat18        R-MAT scale 18 (262,144 nodes, edge factor 16) into 256 parts with KaMinPar's
                ``largek`` and ``default`` presets and METIS (pymetis), ``--repeats`` times each,
                every run in its own process: partition time (after a first call on a tiny
                graph, recorded as ``first_call_s``, took the one-off start-up), peak RSS of
                that process (graph included), halo rows (partitioning.metrics.halo_counts:
                total and per-part maximum), edge cut, node and edge balance. Medians, and
                KaMinPar's ratios to METIS measured in the same run.
  rmat22        R-MAT scale 22 (4,194,304 nodes, about 128M directed edges) into 256 parts with
                KaMinPar ``largek``, partitioning alone in its own process: time, peak RSS, halo
                rows, edge cut, balance. The graph is generated once into ``--work`` and reused.
  rmat22-store  the same graph as a converted folder (``gnnscale convert``, 16 features), then
                ``gnnscale partition --method kaminpar --parts 256`` under GNU time: wall time and
                peak RSS of the whole command, store write included.
  snap          the SNAP graphs of the shared datasets (facebook-combined, email-enron,
                ca-astroph) into 8 and 64 parts: KaMinPar (``default`` and ``largek``) against
                METIS on edge cut, halo rows and balance.
Results are merged into benchmarks/results/kaminpar_scale.json under the step's name. Threads:
KaMinPar uses every core of the process (``--threads`` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from partition_quality import snap_graphs  # noqa: E402
from partition_scale import generate  # noqa: E402

BIN = Path(sys.executable).parent
METHODS_RMAT18 = [("kaminpar", "largek"), ("kaminpar", "default"), ("metis", None)]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step", choices=["rmat18", "rmat22", "rmat22-store", "snap"])
    parser.add_argument("--parts", type=int, default=256, help="parts for the R-MAT steps")
    parser.add_argument("--repeats", type=int, default=3, help="runs per method (rmat18)")
    parser.add_argument("--threads", type=int, default=None,
                        help="KaMinPar threads; None means every core")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", default="/tmp/gnnscale-kaminpar-bench", help="scratch folder")
    parser.add_argument("--keep", action="store_true", help="keep the generated graphs")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/kaminpar_scale.json"))
    parser.add_argument("--worker", nargs=3, metavar=("GRAPH_DIR", "METHOD", "PRESET"),
                        help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def method_params(method: str, preset, threads) -> dict:
    if method != "kaminpar":
        return {}
    return {"preset": preset, **({"threads": threads} if threads else {})}


def quality(graph, partition, exact_halo: bool) -> dict:
    """Halo rows, edge cut and balance; halo rows from partitioning.metrics when ``exact_halo``
    (it builds an O(E) presence matrix), else from a bitset of (node, part) pairs."""
    from partitioning.metrics import halo_counts

    parts = partition.num_parts
    node_parts = partition.node_parts
    dst_parts = np.repeat(node_parts, np.diff(graph.indptr))
    cut = int(np.count_nonzero(node_parts[graph.indices] != dst_parts))
    del dst_parts
    if exact_halo:
        halo = halo_counts(graph, partition)
    else:
        halo = _halo_bitset(graph.indptr, graph.indices, node_parts.astype(np.int64), parts)
    sizes = np.bincount(node_parts, minlength=parts)
    edges = np.bincount(node_parts, weights=np.diff(graph.indptr), minlength=parts)
    return {"halo_rows_total": int(halo.sum()), "halo_rows_max": int(halo.max()),
            "edge_cut": cut, "edge_cut_fraction": cut / max(graph.num_edges, 1),
            "balance_nodes": float(sizes.max() / sizes.mean()),
            "balance_edges": float(edges.max() / edges.mean()),
            "nonempty_parts": int(np.count_nonzero(sizes))}


def _halo_bitset(indptr, indices, node_parts, parts):
    import numba

    @numba.njit(cache=False)
    def count(indptr, indices, node_parts, parts, seen, halo):
        words = (parts + 63) // 64
        for v in range(indptr.shape[0] - 1):
            p = node_parts[v]
            for j in range(indptr[v], indptr[v + 1]):
                u = indices[j]
                if node_parts[u] != p:
                    w = u * words + p // 64
                    bit = np.uint64(1) << np.uint64(p % 64)
                    if not seen[w] & bit:
                        seen[w] |= bit
                        halo[p] += 1

    seen = np.zeros((indptr.shape[0] - 1) * ((parts + 63) // 64), dtype=np.uint64)
    halo = np.zeros(parts, dtype=np.int64)
    count(indptr, indices, node_parts, parts, seen, halo)
    return halo


def worker(graph_dir: Path, method: str, preset, parts: int, seed: int, threads) -> dict:
    """One partitioning in this process: time and peak RSS before any metric is computed."""
    from gnnscale.cli.resource_use import peak_rss_bytes
    from partitioning import CSRGraph, make_partitioner

    graph = CSRGraph(np.load(graph_dir / "indptr.npy"), np.load(graph_dir / "indices.npy"),
                     validate=False)
    rss_loaded = peak_rss_bytes()
    params = method_params(method, preset, threads)
    # A first call on a tiny graph pays the one-off start-up (numba loading its compiled
    # kernels, about 1-2 s here) outside the measured call, for every method alike.
    ring = CSRGraph.from_edge_index(np.arange(64), (np.arange(64) + 1) % 64, 64, symmetrize=True)
    first_call = make_partitioner(method, num_parts=4, seed=seed, **params).fit(ring).time_s
    partition = make_partitioner(method, num_parts=parts, seed=seed, **params).fit(graph)
    row = {"method": method, "preset": preset, "parts": parts, "time_s": partition.time_s,
           "first_call_s": first_call, "rss_after_load_bytes": rss_loaded,
           "peak_rss_bytes": peak_rss_bytes()}
    row.update(quality(graph, partition, exact_halo=graph.num_edges < 20_000_000))
    return row


def run_worker(graph_dir: Path, method: str, preset, args) -> dict:
    cmd = [sys.executable, __file__, "--parts", str(args.parts), "--seed", str(args.seed),
           "--worker", str(graph_dir), method, str(preset)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"worker failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rmat_graph(work: Path, scale: int, seed: int) -> tuple[Path, dict]:
    """The R-MAT graph's CSR as .npy in ``work/rmat{scale}`` (generated once)."""
    folder = work / f"rmat{scale}"
    stats_file = folder / "stats.json"
    if not stats_file.exists():
        folder.mkdir(parents=True, exist_ok=True)
        stats = generate(scale, 16, seed, folder)
        stats_file.write_text(json.dumps(stats))
    return folder, json.loads(stats_file.read_text())


def median_rows(rows: list[dict]) -> dict:
    """Median of every number over repeated runs of one method (quality is from the first)."""
    out = dict(rows[0])
    for key in ("time_s", "peak_rss_bytes", "rss_after_load_bytes"):
        out[key] = statistics.median(r[key] for r in rows)
    out["time_s_runs"] = [round(r["time_s"], 3) for r in rows]
    out["halo_rows_total_runs"] = [r["halo_rows_total"] for r in rows]
    return out


def step_rmat18(args, work: Path) -> dict:
    folder, stats = rmat_graph(work, 18, args.seed)
    runs = {f"{m}-{p}" if p else m: [] for m, p in METHODS_RMAT18}
    for _ in range(args.repeats):  # interleaved, so load drifts hit every method alike
        for method, preset in METHODS_RMAT18:
            row = run_worker(folder, method, preset, args)
            runs[f"{method}-{preset}" if preset else method].append(row)
            print(f"  {method} {preset or ''}: {row['time_s']:.1f} s, halo rows "
                  f"{row['halo_rows_total']:,}, peak RSS {row['peak_rss_bytes'] / 2**30:.2f} "
                  f"GiB", flush=True)
    methods = {name: median_rows(rows) for name, rows in runs.items()}
    metis = methods["metis"]
    for name, row in methods.items():
        if name != "metis":
            row["speedup_vs_metis"] = metis["time_s"] / row["time_s"]
            row["halo_rows_vs_metis"] = row["halo_rows_total"] / metis["halo_rows_total"]
            row["edge_cut_vs_metis"] = row["edge_cut"] / metis["edge_cut"]
    return {"graph": stats, "parts": args.parts, "repeats": args.repeats, "methods": methods}


def step_rmat22(args, work: Path) -> dict:
    folder, stats = rmat_graph(work, 22, args.seed)
    row = run_worker(folder, "kaminpar", "largek", args)
    print(f"  kaminpar largek: {row['time_s']:.1f} s, peak RSS "
          f"{row['peak_rss_bytes'] / 2**30:.2f} GiB (graph alone "
          f"{row['rss_after_load_bytes'] / 2**30:.2f} GiB)", flush=True)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return {"graph": stats, "parts": args.parts, "methods": {"kaminpar-largek": row}}


def timed(cmd: list[str]) -> dict:
    """Run ``cmd`` under GNU time: wall seconds, peak RSS (bytes), output tail."""
    print("$", " ".join(cmd), flush=True)
    start = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"))
    wall = time.perf_counter() - start
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {proc.stderr[-2000:]}")
    print(proc.stdout[-1500:], flush=True)
    return {"command": " ".join(cmd), "wall_s": round(wall, 2),
            "peak_rss_bytes": int(match.group(1)) * 1024 if match else None,
            "stdout_tail": proc.stdout[-1200:]}


def step_rmat22_store(args, work: Path) -> dict:
    converted, store = work / "rmat22-converted", work / "rmat22-kaminpar-store"
    result = {"graph": "R-MAT scale 22, edge factor 16, 16 features", "parts": args.parts}
    if not converted.exists():
        result["convert"] = timed([str(BIN / "gnnscale"), "convert", "--dataset", "rmat",
                                   "--dataset-option", "scale=22", "--dataset-option",
                                   "num_features=16", "--out", str(converted)])
    params = ["--param", "preset=largek"] + (
        ["--param", f"threads={args.threads}"] if args.threads else [])
    run = timed([str(BIN / "gnnscale"), "partition", "--dataset", str(converted), "--method",
                 "kaminpar", "--parts", str(args.parts), *params, "--out", str(store),
                 "--overwrite"])
    run["store_bytes"] = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
    result["partition"] = run
    if not args.keep:
        shutil.rmtree(store, ignore_errors=True)
        shutil.rmtree(converted, ignore_errors=True)
    return result


def step_snap(args, _work: Path) -> dict:
    from partitioning import make_partitioner

    results = []
    for name, graph in snap_graphs():
        for parts in (8, 64):
            rows = {}
            for method, preset in (("kaminpar", "default"), ("kaminpar", "largek"),
                                   ("metis", None)):
                part = make_partitioner(method, num_parts=parts, seed=args.seed,
                                        **method_params(method, preset, args.threads)).fit(graph)
                rows[f"{method}-{preset}" if preset else method] = {
                    "time_s": part.time_s, **quality(graph, part, exact_halo=True)}
            for row in rows.values():
                row["edge_cut_vs_metis"] = row["edge_cut"] / rows["metis"]["edge_cut"]
                row["halo_rows_vs_metis"] = \
                    row["halo_rows_total"] / rows["metis"]["halo_rows_total"]
            results.append({"graph": name, "num_nodes": graph.num_nodes,
                            "num_edges": graph.num_edges, "parts": parts, "methods": rows})
            print(f"  {name:<18} P={parts:<3} " + "  ".join(
                f"{m}: cut x{r['edge_cut_vs_metis']:.3f} halo x{r['halo_rows_vs_metis']:.3f} "
                f"bal {r['balance_nodes']:.3f}" for m, r in rows.items()), flush=True)
    return {"results": results}


STEPS = {"rmat18": step_rmat18, "rmat22": step_rmat22, "rmat22-store": step_rmat22_store,
         "snap": step_snap}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        graph_dir, method, preset = args.worker
        row = worker(Path(graph_dir), method, None if preset == "None" else preset, args.parts,
                     args.seed, args.threads)
        print(json.dumps(row))
        return 0
    if not args.step:
        raise SystemExit("--step is required")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    result = STEPS[args.step](args, work)
    result.update(wall_s=round(time.perf_counter() - started, 1), cpu_count=os.cpu_count(),
                  threads=args.threads or len(os.sched_getaffinity(0)),
                  command=" ".join([Path(sys.argv[0]).name, *sys.argv[1:]]))
    out = Path(args.out)
    merged = json.loads(out.read_text()) if out.exists() else {}
    merged[args.step] = result
    out.write_text(json.dumps(merged, indent=1) + "\n")
    print(f"wrote {out} [{args.step}] ({result['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
