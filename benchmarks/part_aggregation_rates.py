"""Aggregation time of each part's own blocks against the time model's per-edge constant.

The time model (``planning/cost_model.py``) charges every edge of a part the same cost per
non-zero at a width (``nnz_seconds``: ``gamma_nnz + gamma_edge`` x width, or the small rows'
line), calibrated on graphs with uniformly random columns. This measures what
each part's inner block (owned sources, with GCN's self-loops) and boundary block (halo
sources) actually take with gnnscale's sparse product, alone on one thread, so that the gap the
model leaves (the gathers' locality: a part holding a dense core re-reads few hot rows) is
visible per partitioner::

    flock /tmp/gnnscale-bench.lock .venv/bin/python benchmarks/part_aggregation_rates.py \\
        --scale 18 --parts 4 8 --methods metis random libra

``--dataset`` takes any graph ``benchmarks/tune_validation.py`` trains (a shipped or downloaded
name, ``rmat-S``) instead of R-MAT ``--scale``, and ``--width`` several widths; the narrow rows
of a small graph's GCN (ca-AstroPh: 5 features, 4 classes, 2 parts as on two hosts)::

    flock /tmp/gnnscale-bench.lock .venv/bin/python benchmarks/part_aggregation_rates.py \\
        --dataset SNAP-ca-astroph --parts 2 --methods kaminpar metis random --width 5 4 \\
        --reps 301 --out benchmarks/results/part_aggregation_rates_astroph.json

Vertex cuts (Libra) have one block per part: its edges over its local nodes. Prints per part
milliseconds and nanoseconds per edge for both blocks, and the model's nanoseconds per edge
(``compute_constants`` at one thread, at each width); writes ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=18)
    parser.add_argument("--dataset", default=None,
                        help="a graph by name (as tune_validation.py loads it) instead of R-MAT "
                             "--scale")
    parser.add_argument("--parts", nargs="+", type=int, default=[4, 8])
    parser.add_argument("--methods", nargs="+", default=["metis", "random", "libra"])
    parser.add_argument("--width", type=int, nargs="+", default=[16],
                        help="feature widths aggregated")
    parser.add_argument("--reps", type=int, default=11, help="timed products per block")
    parser.add_argument("--out",
                        default=str(REPO / "benchmarks/results/part_aggregation_rates.json"))
    return parser.parse_args()


ARGS = parse_args()
for _var in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import torch  # noqa: E402

from gnnscale.cli.calibrate import compute_constants  # noqa: E402
from gnnscale.data import load_dataset  # noqa: E402
from gnnscale.graph.sparse import SparseBlock  # noqa: E402
from partitioning import make_partitioner  # noqa: E402
from planning.cost_model import nnz_seconds  # noqa: E402


def median_seconds(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int],
                   width: int) -> float:
    """Median time of one product of the ``rows x cols`` 0/1 block with a random dense input
    ``width`` wide."""
    if rows.size == 0:
        return 0.0
    matrix = sp.csr_matrix((np.ones(rows.size, np.float32), (rows, cols)), shape=shape)
    block, dense = SparseBlock(matrix), torch.randn(shape[1], width)
    block.matmul(dense)  # warm-up: compiled kernel, caches
    times = []
    for _ in range(ARGS.reps):
        start = time.perf_counter()
        block.matmul(dense)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def local_ids(nodes: np.ndarray, num_nodes: int) -> np.ndarray:
    """Global id -> position in ``nodes`` (-1 elsewhere)."""
    ids = np.full(num_nodes, -1, dtype=np.int64)
    ids[nodes] = np.arange(nodes.size)
    return ids


def part_blocks(src, dst, partition, part: int, num_nodes: int,
                width: int) -> tuple[float, float, int, int]:
    """(inner seconds, boundary seconds, inner edges, boundary edges) of one part at
    ``width``."""
    if partition.kind == "vertex_cut":
        mine = partition.edge_parts == part
        s, d = src[mine], dst[mine]
        nodes = np.unique(np.concatenate([s, d]))
        ids = local_ids(nodes, num_nodes)
        return median_seconds(ids[d], ids[s], (nodes.size, nodes.size), width), 0.0, s.size, 0
    owner = partition.node_parts
    owned = np.flatnonzero(owner == part)
    ids = local_ids(owned, num_nodes)
    mine = owner[dst] == part
    s, d = src[mine], dst[mine]
    inner = owner[s] == part
    loops = np.arange(owned.size)
    inner_s = median_seconds(np.concatenate([ids[d[inner]], loops]),
                             np.concatenate([ids[s[inner]], loops]), (owned.size, owned.size),
                             width)
    halo = np.unique(s[~inner])
    halo_ids = local_ids(halo, num_nodes)
    boundary_s = median_seconds(ids[d[~inner]], halo_ids[s[~inner]], (owned.size, halo.size),
                                width)
    return inner_s, boundary_s, int(inner.sum()) + owned.size, int((~inner).sum())


def load_graph():
    """``--dataset`` as tune_validation.py loads it, else R-MAT ``--scale`` (features as wide as
    the widest ``--width``)."""
    if ARGS.dataset is not None:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from tune_validation import load

        return load(ARGS.dataset), ARGS.dataset
    return load_dataset("rmat", scale=ARGS.scale, num_features=max(ARGS.width), num_classes=16,
                        seed=0), f"R-MAT {ARGS.scale}"


def main() -> None:
    torch.set_num_threads(1)
    data, name = load_graph()
    src, dst = (np.asarray(a) for a in data.edge_index())
    constants = compute_constants(1)
    model = {w: nnz_seconds(constants, w) for w in ARGS.width}
    print(f"{name}, one thread; the model's cost per edge: " + ", ".join(
        f"{model[w] * 1e9:.2f} ns at width {w}" for w in ARGS.width))
    rows = []
    for parts in ARGS.parts:
        for method in ARGS.methods:
            partition = make_partitioner(method, num_parts=parts, seed=0).fit(data)
            for part in range(parts):
                for width in ARGS.width:
                    inner_s, boundary_s, inner_e, boundary_e = part_blocks(
                        src, dst, partition, part, data.num_nodes, width)
                    rows.append({"method": method, "parts": parts, "part": part,
                                 "width": width, "inner_s": inner_s, "boundary_s": boundary_s,
                                 "inner_edges": inner_e, "boundary_edges": boundary_e})
                    per_edge = [1e9 * t / e if e else float("nan")
                                for t, e in ((inner_s, inner_e), (boundary_s, boundary_e))]
                    print(f"{method:<8} {parts:>3} parts, part {part:>3}, width {width:>3}: "
                          f"inner {inner_e:>9,} edges {inner_s * 1e3:7.3f} ms "
                          f"({per_edge[0]:5.2f} ns/edge), boundary {boundary_e:>9,} edges "
                          f"{boundary_s * 1e3:7.3f} ms ({per_edge[1]:5.2f} ns/edge), both "
                          f"{(inner_s + boundary_s) * 1e3:7.3f} ms", flush=True)
    Path(ARGS.out).write_text(json.dumps({"graph": name, "widths": ARGS.width,
                                          "model_ns_per_edge": {str(w): model[w] * 1e9
                                                                for w in ARGS.width},
                                          "parts": rows}, indent=1))


if __name__ == "__main__":
    main()
