"""Compressed sparse row graph keyed by destination, the one graph type partitioners consume.

Row ``v`` of the CSR lists the sources ``u`` of the edges ``u -> v``
(``indices[indptr[v]:indptr[v+1]]``), which is the layout message passing aggregates over. Edge
``e`` of the graph is the ``e``-th entry of ``indices``; vertex-cut partitions align their
per-edge arrays with this order.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .csr_ops import simple_csr_from_edges
from .errors import PartitionError

__all__ = ["CSRGraph", "as_csr_graph"]


def _as_int64(name: str, values) -> np.ndarray:
    """Return ``values`` as a 1-D int64 array; refuse floats with fractions, bools and N-D input."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise PartitionError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind in "iu":
        if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
            raise PartitionError(f"{name} has values beyond int64: max {arr.max()}")
        return arr.astype(np.int64, copy=False)
    if arr.size == 0 and arr.dtype.kind == "f":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.floor(arr))
        if bad.any():
            raise PartitionError(
                f"{name} must hold integers, found non-integer value {arr[np.argmax(bad)]!r}")
        return arr.astype(np.int64)
    raise PartitionError(f"{name} must be an integer array, got dtype {arr.dtype}")


class CSRGraph:
    """Directed graph in CSR by destination: row v lists the sources u of the edges u->v.

    Attributes:
        indptr: int64 ``[N+1]``, monotone, ``indptr[0] == 0``, ``indptr[N] == E``.
        indices: int64 ``[E]``, the source node of each in-edge, in ``[0, N)``.
        num_nodes: ``N``.

    Args:
        indptr, indices: the CSR arrays (any integer dtype; converted to int64).
        num_nodes: defaults to ``len(indptr) - 1``; must agree with it when given.
        validate: check monotone ``indptr`` and ids in range (O(E)); skip only for trusted arrays.
    """

    def __init__(self, indptr, indices, num_nodes: int | None = None, validate: bool = True):
        self.indptr = _as_int64("indptr", indptr)
        self.indices = _as_int64("indices", indices)
        if self.indptr.size == 0:
            raise PartitionError("indptr is empty: it needs num_nodes + 1 entries")
        n = self.indptr.size - 1
        if num_nodes is not None and int(num_nodes) != n:
            raise PartitionError(f"num_nodes={num_nodes} disagrees with len(indptr) - 1 = {n}")
        self.num_nodes = int(n)
        if validate:
            self.validate()

    def validate(self) -> None:
        """Raise :class:`PartitionError` unless the CSR arrays are consistent."""
        if self.indptr[0] != 0:
            raise PartitionError(f"indptr[0] must be 0, got {self.indptr[0]}")
        if self.indptr[-1] != self.indices.size:
            raise PartitionError(
                f"indptr[-1]={self.indptr[-1]} disagrees with len(indices)={self.indices.size}")
        steps = np.diff(self.indptr)
        if steps.size and steps.min() < 0:
            row = int(np.argmin(steps))
            raise PartitionError(f"indptr is not monotone: it decreases at row {row}")
        if self.indices.size:
            lo, hi = int(self.indices.min()), int(self.indices.max())
            if lo < 0:
                raise PartitionError(f"negative node id {lo} in indices")
            if hi >= self.num_nodes:
                raise PartitionError(
                    f"node id {hi} in indices is out of range for num_nodes={self.num_nodes}")

    def __repr__(self) -> str:
        return f"CSRGraph(num_nodes={self.num_nodes}, num_edges={self.num_edges})"

    @property
    def num_edges(self) -> int:
        """Number of directed edges ``E`` (entries of ``indices``)."""
        return int(self.indices.size)

    def in_degree(self) -> np.ndarray:
        """int64 ``[N]``: number of edges ending at each node."""
        return np.diff(self.indptr)

    def out_degree(self) -> np.ndarray:
        """int64 ``[N]``: number of edges leaving each node."""
        return np.bincount(self.indices, minlength=self.num_nodes).astype(np.int64)

    def edge_index(self) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` int64 arrays, one entry per edge, in CSR order."""
        dst = np.repeat(np.arange(self.num_nodes, dtype=np.int64), self.in_degree())
        return self.indices.copy(), dst

    @classmethod
    def from_edge_index(cls, src, dst, num_nodes: int, symmetrize: bool = False,
                        remove_duplicates: bool = False,
                        remove_self_loops: bool = False) -> "CSRGraph":
        """Build from edge lists ``src[i] -> dst[i]``.

        Args:
            src, dst: integer arrays of equal length, ids in ``[0, num_nodes)``.
            num_nodes: ``N`` (isolated nodes allowed).
            symmetrize: add ``v -> u`` for every ``u -> v`` (implies removing duplicates).
            remove_duplicates: keep one copy of repeated edges.
            remove_self_loops: drop ``v -> v`` edges.
        Rows are sorted by destination, stably (edges with equal destination keep input order,
        unless duplicates are removed, in which case they are sorted by source).
        """
        src = _as_int64("src", src)
        dst = _as_int64("dst", dst)
        if src.size != dst.size:
            raise PartitionError(f"src and dst differ in length: {src.size} vs {dst.size}")
        n = _check_num_nodes(num_nodes)
        for name, arr in (("src", src), ("dst", dst)):
            if arr.size and arr.min() < 0:
                raise PartitionError(f"negative node id {arr.min()} in {name} is out of range")
            if arr.size and arr.max() >= n:
                raise PartitionError(
                    f"node id {arr.max()} in {name} is out of range for num_nodes={n}")
        if symmetrize or remove_duplicates:  # a counting sort by destination, rows sorted
            indptr, indices = simple_csr_from_edges(src, dst, n, symmetrize=symmetrize,
                                                    remove_self_loops=remove_self_loops)
            return cls(indptr, indices, n, validate=False)
        if remove_self_loops:
            keep = src != dst
            src, dst = src[keep], dst[keep]
        order = np.argsort(dst, kind="stable")
        src, dst = src[order], dst[order]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
        return cls(indptr, src, n, validate=False)

    @classmethod
    def from_scipy(cls, matrix) -> "CSRGraph":
        """Build from a square scipy sparse matrix; ``matrix[v, u] != 0`` means edge ``u -> v``.

        Explicitly stored zeros are dropped.
        """
        if not sp.issparse(matrix):
            raise PartitionError(f"expected a scipy sparse matrix, got {type(matrix).__name__}")
        if matrix.shape[0] != matrix.shape[1]:
            raise PartitionError(f"adjacency matrix must be square, got shape {matrix.shape}")
        csr = sp.csr_matrix(matrix, copy=True)
        csr.eliminate_zeros()
        csr.sort_indices()
        return cls(csr.indptr, csr.indices, csr.shape[0])

    def to_scipy(self) -> sp.csr_matrix:
        """``N x N`` csr_matrix of ones, ``[v, u] = 1`` for edge ``u -> v`` (duplicates summed)."""
        data = np.ones(self.num_edges, dtype=np.float32)
        return sp.csr_matrix((data, self.indices, self.indptr),
                             shape=(self.num_nodes, self.num_nodes))

    def undirected_simple(self) -> "CSRGraph":
        """The undirected graph without self loops or duplicate edges (what METIS and KaMinPar
        read): ``self`` when it already is one (checked with one transpose, ``8 E`` bytes, and
        bounded passes), else a symmetrised copy."""
        from .csr_ops import is_sorted_simple_rows, transpose_csr

        if is_sorted_simple_rows(self.indptr, self.indices):
            out_indptr, out_dst, _ = transpose_csr(self.indptr, self.indices, self.num_nodes,
                                                   edge_ids=False)
            same = np.array_equal(out_indptr, self.indptr) and \
                np.array_equal(out_dst, self.indices)
            del out_indptr, out_dst
            if same:
                return self
        src, dst = self.edge_index()
        return CSRGraph.from_edge_index(src, dst, self.num_nodes, symmetrize=True,
                                        remove_self_loops=True)

    def symmetrized(self) -> "CSRGraph":
        """Undirected union ``{u->v} | {v->u}`` without duplicate edges (self loops kept once)."""
        src, dst = self.edge_index()
        return CSRGraph.from_edge_index(src, dst, self.num_nodes, symmetrize=True)


def _check_num_nodes(num_nodes) -> int:
    if isinstance(num_nodes, (bool, np.bool_)) or not isinstance(num_nodes, (int, np.integer)):
        raise PartitionError(f"num_nodes must be an integer, got {num_nodes!r}")
    if num_nodes < 0:
        raise PartitionError(f"num_nodes must be >= 0, got {num_nodes}")
    return int(num_nodes)


def as_csr_graph(obj) -> CSRGraph:
    """Return ``obj`` as a :class:`CSRGraph` without copying arrays where possible.

    Accepts a ``CSRGraph``, any object with ``.indptr``/``.indices``/``.num_nodes`` (e.g.
    gnnscale's ``GraphData``; torch tensors are converted through ``.numpy()``), or a scipy sparse
    matrix (rows are destinations).
    """
    if isinstance(obj, CSRGraph):
        return obj
    if sp.issparse(obj):
        return CSRGraph.from_scipy(obj)
    if all(hasattr(obj, a) for a in ("indptr", "indices", "num_nodes")):
        return CSRGraph(_to_numpy(obj.indptr), _to_numpy(obj.indices), int(obj.num_nodes))
    raise PartitionError(
        f"cannot read a graph from {type(obj).__name__}: need a CSRGraph, a scipy sparse matrix "
        "or an object with indptr, indices and num_nodes")


def _to_numpy(values) -> np.ndarray:
    """numpy view of an array-like; torch tensors are handled without importing torch."""
    if hasattr(values, "detach") and hasattr(values, "numpy"):
        return values.detach().cpu().numpy()
    return np.asarray(values)
