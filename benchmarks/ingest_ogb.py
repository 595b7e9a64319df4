"""Ingestion speed: a products-sized R-MAT graph read from OGB's CSV and binary layouts.

The graph: ``generate_rmat(scale=21, num_features=100, num_classes=47)`` (2,097,152 nodes,
every directed CSR entry written as one edge line, 100 float32 features, 47 classes, its
50/25/25 split). Steps ``write-csv`` and ``write-binary`` store it under ``--work``:

- OGB CSV layout (``raw/edge.csv.gz``, ``node-feat.csv.gz``, ``node-label.csv.gz``,
  ``num-node-list.csv.gz``, ``num-edge-list.csv.gz``, ``split/time/{train,valid,test}.csv.gz``),
  written with pyarrow's CSV writer through gzip level 1; features as float32's shortest
  round-trip text, so the file holds them exactly;
- ``ogb``'s binary layout as ogbn-papers100M ships (``raw/data.npz`` with ``edge_index``,
  ``node_feat``, ``num_nodes_list``, ``num_edges_list``; ``raw/node-label.npz`` with a float
  ``node_label [N, 1]``; the same split CSVs), deflated zip members as ``ogb``'s
  ``np.savez_compressed`` writes them, at zlib level 1.

Steps ``new`` (``gnnscale.data.ogb.load_ogb``), ``old`` (the ``np.loadtxt`` reader gnnscale used
before, kept below only for this comparison) and ``binary``
(``gnnscale.data.ogb_binary.load_ogb_binary``) each load the graph ``--repeats`` times, every
load in a fresh subprocess, so its wall time and peak RSS (``ru_maxrss``, the loaded graph
included) are its own. All three must produce the same graph (a digest of every array is
compared). Results are merged into ``benchmarks/results/ingest_ogb.json``; run the steps one by
one under the benchmark lock (each stays under ten minutes at scale 21; a load step run again
adds its runs to the earlier ones of the same readers, ``--fresh`` starts over)::

    flock /tmp/gnnscale-bench.lock python benchmarks/ingest_ogb.py --step write-csv
    flock /tmp/gnnscale-bench.lock python benchmarks/ingest_ogb.py --step write-binary
    flock /tmp/gnnscale-bench.lock python benchmarks/ingest_ogb.py --step new old binary --repeats 1
    flock /tmp/gnnscale-bench.lock python benchmarks/ingest_ogb.py --step new old binary --repeats 1
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results" / "ingest_ogb.json"
FEATURE_ROWS_PER_WRITE = 1 << 16


def write(step: str, scale: int, features: int, classes: int, work: Path) -> dict:
    """Generate the R-MAT graph; write it in the OGB CSV (``write-csv``) or binary layout."""
    from gnnscale.data import generate_rmat

    t0 = time.perf_counter()
    graph = generate_rmat(scale=scale, num_features=features, num_classes=classes)
    generated = time.perf_counter() - t0
    t0 = time.perf_counter()
    folder = (_write_csv if step == "write-csv" else _write_binary)(graph, work)
    return {"scale": scale, "num_nodes": graph.num_nodes, "edge_lines": graph.num_edges,
            "num_features": features, "num_classes": classes, "generate_s": generated,
            "write_s": time.perf_counter() - t0, "files": _sizes(folder)}


def _sizes(folder: Path) -> dict:
    return {str(f.relative_to(folder)): f.stat().st_size for f in sorted(folder.rglob("*"))
            if f.is_file()}


def _write_csv(graph, work: Path) -> Path:
    """OGB CSV layout through pyarrow's CSV writer and gzip level 1."""
    import pyarrow as pa
    from pyarrow import csv

    folder = work / "ogbn_rmat_csv"
    options = csv.WriteOptions(include_header=False)

    def table(path: Path, blocks) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        first = next(blocks)
        with gzip.open(path, "wb", compresslevel=1) as sink, \
                csv.CSVWriter(sink, first.schema, write_options=options) as writer:
            writer.write_table(first)
            for block in blocks:
                writer.write_table(block)

    def columns(*arrays):
        yield pa.table({str(j): a for j, a in enumerate(arrays)})

    def feature_blocks():
        for start in range(0, graph.num_nodes, FEATURE_ROWS_PER_WRITE):
            rows = np.ascontiguousarray(graph.x[start:start + FEATURE_ROWS_PER_WRITE].T)
            yield pa.table({str(j): rows[j] for j in range(rows.shape[0])})

    raw = folder / "raw"
    src, dst = graph.edge_index()
    table(raw / "edge.csv.gz", columns(src, dst))
    del src, dst
    table(raw / "node-feat.csv.gz", feature_blocks())
    table(raw / "node-label.csv.gz", columns(graph.y))
    table(raw / "num-node-list.csv.gz", columns(np.array([graph.num_nodes])))
    table(raw / "num-edge-list.csv.gz", columns(np.array([graph.num_edges])))
    _write_split(graph, folder)
    return folder


def _write_split(graph, folder: Path) -> None:
    split = folder / "split" / "time"
    split.mkdir(parents=True, exist_ok=True)
    for kind, mask in (("train", graph.train_mask), ("valid", graph.val_mask),
                       ("test", graph.test_mask)):
        with gzip.open(split / f"{kind}.csv.gz", "wt", compresslevel=1) as handle:
            np.savetxt(handle, np.flatnonzero(mask), fmt="%d")


def _write_binary(graph, work: Path) -> Path:
    """``ogb``'s binary layout: deflated ``.npz`` members as ``np.savez_compressed`` writes them,
    at zlib level 1 instead of 6 so that writing 1.9 GB stays within minutes."""
    folder = work / "ogbn_rmat_bin"
    (folder / "raw").mkdir(parents=True, exist_ok=True)
    src, dst = graph.edge_index()
    _savez_deflated(folder / "raw" / "data.npz", edge_index=np.stack([src, dst]),
                    node_feat=graph.x, num_nodes_list=np.array([graph.num_nodes]),
                    num_edges_list=np.array([src.size]))
    del src, dst
    _savez_deflated(folder / "raw" / "node-label.npz",
                    node_label=graph.y.astype(np.float64)[:, None])
    _write_split(graph, folder)
    return folder


def _savez_deflated(path: Path, **arrays) -> None:
    """``np.savez_compressed`` with a chosen zlib level (numpy's own always uses level 6)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for key, value in arrays.items():
            with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


# --- the reader gnnscale used before: np.loadtxt on every file (kept only for comparison) ---

def old_read_csv(path: Path, dtype, *, columns: int | None = None) -> np.ndarray:
    """The former ``gnnscale.data.ogb.read_csv``: ``np.loadtxt`` through Python's gzip."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = np.loadtxt(handle, dtype=dtype, delimiter=",", ndmin=2, comments=None)
    if columns is not None and table.shape[1] != columns:
        raise ValueError(f"{path} should have {columns} column(s), found {table.shape[1]}")
    return table


def old_load_ogb(folder: Path):
    """The former ``load_ogb`` read path (one split scheme, all files present)."""
    from gnnscale.data._csr import csr_by_destination
    from gnnscale.data.graph_data import GraphData

    raw = folder / "raw"
    scheme = next(d for d in (folder / "split").iterdir() if d.is_dir())
    ids = [old_read_csv(scheme / f"{k}.csv.gz", np.int64, columns=1).ravel()
           for k in ("train", "valid", "test")]
    edges = old_read_csv(raw / "edge.csv.gz", np.int64, columns=2)
    features = old_read_csv(raw / "node-feat.csv.gz", np.float32)
    labels = old_read_csv(raw / "node-label.csv.gz", np.float64)[:, 0]
    num_nodes = int(old_read_csv(raw / "num-node-list.csv.gz", np.int64).ravel()[0])
    y = np.where(np.isfinite(labels), labels, -1).astype(np.int64)
    masks = []
    for part in ids:
        mask = np.zeros(num_nodes, dtype=bool)
        mask[part] = True
        masks.append(mask)
    indptr, indices = csr_by_destination(edges[:, 0], edges[:, 1], num_nodes, symmetrize=True)
    return GraphData(indptr, indices, features, y, *masks, name=folder.name).validate()


def measure(kind: str, folder: Path) -> dict:
    """Load ``folder`` once with reader ``kind``; time, peak RSS and a digest of the result."""
    if kind == "new":
        from gnnscale.data.ogb import load_ogb as loader
    elif kind == "binary":
        from gnnscale.data.ogb_binary import load_ogb_binary as loader
    else:
        loader = old_load_ogb
    before = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    graph = loader(folder)
    seconds = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime
    peak = usage.ru_maxrss / 2**20
    digest = hashlib.sha256()
    for field in ("indptr", "indices", "x", "y", "train_mask", "val_mask", "test_mask"):
        digest.update(np.ascontiguousarray(getattr(graph, field)).tobytes())
    return {"seconds": seconds, "cpu_s": cpu, "peak_rss_gb": peak,
            "digest": digest.hexdigest()[:16],
            "summary": graph.summary()}


def run_steps(kinds, work: Path, repeats: int, earlier: dict) -> dict:
    """``repeats`` loads with each reader in ``kinds``, interleaved (new, old, new, old, ...),
    each in a fresh process; per reader the median time, the largest peak RSS and all runs,
    counting the runs of ``earlier`` (a previous result of the same readers) too."""
    runs = {kind: list(earlier.get(kind, {}).get("runs", [])) for kind in kinds}
    for _ in range(repeats):
        for kind in kinds:
            folder = work / ("ogbn_rmat_bin" if kind == "binary" else "ogbn_rmat_csv")
            load = os.getloadavg()[0]
            out = subprocess.run([sys.executable, __file__, "--measure", kind, "--folder",
                                  str(folder)], check=True, capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": str(ROOT)})
            runs[kind].append({**json.loads(out.stdout.strip().splitlines()[-1]),
                               "load_average_before": load})
            print(kind, runs[kind][-1], flush=True)
    entries = {}
    for kind, done in runs.items():
        if len({r["digest"] for r in done}) != 1:
            raise SystemExit(f"{kind}: loads disagree: {[r['digest'] for r in done]}")
        folder = work / ("ogbn_rmat_bin" if kind == "binary" else "ogbn_rmat_csv")
        entries[kind] = {"reader": kind, "folder": folder.name, "repeats": len(done),
                         "median_s": statistics.median(r["seconds"] for r in done),
                         "peak_rss_gb": max(r["peak_rss_gb"] for r in done), "runs": done,
                         "digest": done[0]["digest"], "summary": done[0]["summary"],
                         "cpus": os.cpu_count(), "files": _sizes(folder),
                         "interleaved_with": [k for k in kinds if k != kind]}
    return entries


def merge(label: str, entry: dict, out: Path) -> dict:
    """Store ``entry`` under ``label`` in the results file; check every load saw one graph."""
    results = json.loads(out.read_text()) if out.is_file() else {}
    results[label] = entry
    digests = {f"{step}/{kind}": load["digest"] for step, value in results.items()
               if isinstance(value, dict) for kind, load in value.items()
               if isinstance(load, dict) and "digest" in load}
    results["same_graph"] = len(set(digests.values())) <= 1
    results["command"] = ("python benchmarks/ingest_ogb.py --step "
                          "{write-csv | write-binary | new old binary}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    if not results["same_graph"]:
        raise SystemExit(f"readers disagree on the graph: {digests}")
    return results


def ratios(entries: dict) -> dict:
    """Time and peak-RSS ratios of every reader over the first one (measured in the same run)."""
    kinds = list(entries)
    base = entries[kinds[0]]
    out = {}
    for kind in kinds[1:]:
        out[f"{kind}_over_{kinds[0]}_time"] = entries[kind]["median_s"] / base["median_s"]
        out[f"{kind}_over_{kinds[0]}_peak_rss"] = entries[kind]["peak_rss_gb"] / \
            base["peak_rss_gb"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--step", nargs="+",
                        choices=("write-csv", "write-binary", "new", "old", "binary"),
                        help="one write step, or one or more readers (loads interleaved)")
    parser.add_argument("--scale", type=int, default=21)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--classes", type=int, default=47)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/gnnscale-ingest-bench"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--fresh", action="store_true",
                        help="drop earlier runs of the same readers instead of adding to them")
    parser.add_argument("--measure", choices=("new", "old", "binary"), help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.folder)))
        return
    if args.step is None:
        parser.error("choose --step write-csv, write-binary, new, old or binary")
    writes = [s for s in args.step if s.startswith("write")]
    if writes and len(args.step) > 1:
        parser.error("a write step runs alone")
    if writes:
        label, entry = writes[0], write(writes[0], args.scale, args.features, args.classes,
                                        args.work)
    else:
        kinds = list(dict.fromkeys(args.step))
        label = "load " + " ".join(kinds)
        earlier = json.loads(args.out.read_text()).get(label, {}) \
            if args.out.is_file() and not args.fresh else {}
        entry = run_steps(kinds, args.work, args.repeats, earlier)
        entry = {**entry, **ratios(entry)}
    print(json.dumps(merge(label, entry, args.out), indent=2))


if __name__ == "__main__":
    main()
