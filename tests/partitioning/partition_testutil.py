"""Small graphs shared by the partitioning tests (a helper module, not a test file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from partitioning import CSRGraph

# tests/partitioning/<this file> -> parents[2] is the repository root, which ships datasets/.
DATASETS = Path(__file__).resolve().parents[2] / "datasets"


def ring(n: int) -> CSRGraph:
    """Undirected ring 0-1-...-(n-1)-0, both directions stored."""
    src = np.arange(n)
    return CSRGraph.from_edge_index(src, (src + 1) % n, n, symmetrize=True)


def two_cliques(k: int, isolated: int = 0) -> CSRGraph:
    """Two k-cliques joined by one edge, plus ``isolated`` isolated nodes at the end."""
    src, dst = [], []
    for base in (0, k):
        for i in range(k):
            for j in range(k):
                if i != j:
                    src.append(base + i)
                    dst.append(base + j)
    src += [0, k]
    dst += [k, 0]
    return CSRGraph.from_edge_index(src, dst, 2 * k + isolated)


def random_graph(n: int, m: int, seed: int, isolated_fraction: float = 0.1) -> CSRGraph:
    """Directed random graph on n nodes with m edges among the first (1 - fraction) of nodes."""
    rng = np.random.default_rng(seed)
    active = max(2, int(n * (1 - isolated_fraction)))
    src = rng.integers(0, active, m)
    dst = rng.integers(0, active, m)
    return CSRGraph.from_edge_index(src, dst, n)


def load_snap(name: str, filename: str) -> CSRGraph:
    """Read a SNAP edge list from the repository's datasets/ folder."""
    path = DATASETS / name / "raw" / filename
    edges = np.loadtxt(path, dtype=np.int64, comments="#", ndmin=2)
    n = int(edges.max()) + 1
    return CSRGraph.from_edge_index(edges[:, 0], edges[:, 1], n, symmetrize=True,
                                    remove_self_loops=True)


class GraphWithMask:
    """Duck-typed stand-in for gnnscale's GraphData: CSR arrays plus a train_mask."""

    def __init__(self, graph: CSRGraph, train_mask: np.ndarray):
        self.indptr, self.indices, self.num_nodes = graph.indptr, graph.indices, graph.num_nodes
        self.train_mask = train_mask
