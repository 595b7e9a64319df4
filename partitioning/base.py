"""Partition (the result, plain data) and Partitioner (the scikit-learn style estimator).

A :class:`Partition` is arrays plus metadata: for an edge cut, ``node_parts[v]`` is the part that
owns node ``v``; for a vertex cut, ``edge_parts[e]`` is the part of edge ``e`` (aligned with the
graph's CSR order, ``graph.indices``) and ``node_parts[v]`` is the *master* part of ``v``, the one
replica that owns its features, label and optimizer state. Every node, isolated or not, has exactly
one owner in ``node_parts``.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .errors import PartitionError
from .graph import CSRGraph, as_csr_graph

__all__ = ["Partition", "Partitioner", "check_num_parts", "get_train_mask"]

KINDS = ("edge_cut", "vertex_cut")


@dataclass
class Partition:
    """Result of a partitioner.

    Attributes:
        kind: ``"edge_cut"`` or ``"vertex_cut"``.
        num_parts: number of parts ``P``.
        num_nodes: number of nodes ``N`` of the partitioned graph.
        node_parts: int32 ``[N]``; edge cut: owner part of every node; vertex cut: master part.
        edge_parts: int32 ``[E]`` for a vertex cut (part of each edge in CSR order), else ``None``.
        method: registry name of the partitioner that made it.
        params: the partitioner's parameters (JSON-serialisable), including ``seed``.
        time_s: wall time of ``fit`` in seconds.
        peak_memory_bytes: peak of memory allocated through Python/NumPy during ``fit``
            (tracemalloc; native allocations inside METIS or numba are not seen).
    """

    kind: str
    num_parts: int
    num_nodes: int
    node_parts: np.ndarray
    edge_parts: np.ndarray | None = None
    method: str = ""
    params: dict = field(default_factory=dict)
    time_s: float = 0.0
    peak_memory_bytes: int = 0

    def __post_init__(self):
        self.node_parts = np.asarray(self.node_parts, dtype=np.int32)
        if self.edge_parts is not None:
            self.edge_parts = np.asarray(self.edge_parts, dtype=np.int32)

    def validate(self, graph=None) -> "Partition":
        """Check shapes, dtypes and ranges (against ``graph`` when given); return ``self``."""
        if self.kind not in KINDS:
            raise PartitionError(f"partition kind must be one of {KINDS}, got {self.kind!r}")
        if self.node_parts.shape != (self.num_nodes,):
            raise PartitionError(
                f"node_parts has shape {self.node_parts.shape}, expected ({self.num_nodes},)")
        _check_range("node_parts", self.node_parts, self.num_parts)
        if self.kind == "vertex_cut":
            if self.edge_parts is None:
                raise PartitionError("a vertex_cut partition needs edge_parts")
            _check_range("edge_parts", self.edge_parts, self.num_parts)
        elif self.edge_parts is not None:
            raise PartitionError("an edge_cut partition must not carry edge_parts")
        if graph is not None:
            g = as_csr_graph(graph)
            if g.num_nodes != self.num_nodes:
                raise PartitionError(
                    f"partition is for {self.num_nodes} nodes, the graph has {g.num_nodes}")
            if self.edge_parts is not None and self.edge_parts.size != g.num_edges:
                raise PartitionError(
                    f"edge_parts has {self.edge_parts.size} entries, the graph has "
                    f"{g.num_edges} edges")
        return self

    def part_sizes(self) -> np.ndarray:
        """int64 ``[P]``: number of nodes owned (edge cut) or mastered (vertex cut) per part."""
        return np.bincount(self.node_parts, minlength=self.num_parts).astype(np.int64)

    def nodes_of_part(self, part: int) -> np.ndarray:
        """Sorted int64 ids of the nodes owned (mastered) by ``part``."""
        return np.flatnonzero(self.node_parts == part).astype(np.int64)

    def presence(self, graph) -> sp.csr_matrix:
        """Boolean ``N x P`` matrix: ``[v, p]`` is True where node ``v`` is present in part ``p``.

        Edge cut: ``v`` is present where it is owned and where it is a halo node (a source of an
        edge into the part). Vertex cut: where it is an endpoint of an edge of the part, and at its
        master. Row sums are the per-node replica counts.
        """
        g = as_csr_graph(graph)
        self.validate(g)
        n, p = self.num_nodes, self.num_parts
        src, dst = g.edge_index()
        if self.kind == "edge_cut":
            rows = np.concatenate([np.arange(n), src])
            cols = np.concatenate([self.node_parts, self.node_parts[dst]])
        else:
            rows = np.concatenate([np.arange(n), src, dst])
            cols = np.concatenate([self.node_parts, self.edge_parts, self.edge_parts])
        m = sp.csr_matrix((np.ones(rows.size, dtype=bool), (rows, cols)), shape=(n, p))
        m.sum_duplicates()
        return m

    def parts_of_node(self, graph, node: int) -> np.ndarray:
        """Sorted parts in which ``node`` is present (see :meth:`presence`)."""
        m = self.presence(graph)
        return m.indices[m.indptr[node]:m.indptr[node + 1]].astype(np.int64)

    def save(self, path) -> None:
        """Write to a ``.npz`` file (arrays plus JSON metadata)."""
        meta = {k: getattr(self, k) for k in
                ("kind", "num_parts", "num_nodes", "method", "params", "time_s",
                 "peak_memory_bytes")}
        arrays = {"node_parts": self.node_parts}
        if self.edge_parts is not None:
            arrays["edge_parts"] = self.edge_parts
        with open(path, "wb") as fh:
            np.savez(fh, meta=np.array(json.dumps(meta)), **arrays)

    @classmethod
    def load(cls, path) -> "Partition":
        """Read a partition written by :meth:`save`."""
        path = Path(path)
        if not path.is_file():
            raise PartitionError(f"partition file {path} does not exist")
        try:
            with np.load(path, allow_pickle=False) as f:
                meta = json.loads(str(f["meta"]))
                node_parts = f["node_parts"]
                edge_parts = f["edge_parts"] if "edge_parts" in f.files else None
        except (OSError, ValueError, KeyError) as exc:
            raise PartitionError(f"cannot read partition file {path}: {exc}") from None
        return cls(node_parts=node_parts, edge_parts=edge_parts, **meta).validate()


def _check_range(name: str, parts: np.ndarray, num_parts: int) -> None:
    if parts.size and (parts.min() < 0 or parts.max() >= num_parts):
        bad = parts.min() if parts.min() < 0 else parts.max()
        raise PartitionError(f"{name} holds part {bad}, outside [0, {num_parts})")


def check_num_parts(num_parts, num_nodes: int | None = None) -> int:
    """Validate a part count (and against a node count when given); return it as ``int``."""
    if isinstance(num_parts, (bool, np.bool_)) or not isinstance(num_parts, (int, np.integer)):
        raise PartitionError(f"num_parts must be an integer, got {num_parts!r}")
    if num_parts < 1:
        raise PartitionError(f"num_parts={num_parts} must be at least 1")
    if num_nodes is not None:
        if num_nodes == 0:
            raise PartitionError("the graph is empty (0 nodes): nothing to partition")
        if num_parts > num_nodes:
            raise PartitionError(
                f"num_parts={num_parts} exceeds the number of nodes ({num_nodes})")
    return int(num_parts)


def get_train_mask(graph, num_nodes: int) -> np.ndarray | None:
    """Return ``graph.train_mask`` as bool ``[N]`` if the object has one, else ``None``."""
    mask = getattr(graph, "train_mask", None)
    if mask is None:
        return None
    if hasattr(mask, "detach"):
        mask = mask.detach().cpu().numpy()
    mask = np.asarray(mask)
    if mask.shape != (num_nodes,):
        raise PartitionError(f"train_mask has shape {mask.shape}, expected ({num_nodes},)")
    return mask.astype(bool, copy=False)


class Partitioner(ABC):
    """Base class: ``Partitioner(num_parts=P, seed=S, **params).fit(graph) -> Partition``.

    Subclasses set ``name`` (registry name), ``kind`` and ``defaults`` (their extra keyword
    parameters with default values) and implement :meth:`_partition`. Unknown parameters are
    refused. ``fit`` validates the graph and the part count, times the call, records peak traced
    memory, and validates the result.
    """

    name: str = ""
    kind: str = "edge_cut"
    defaults: dict = {}

    def __init__(self, *, num_parts: int, seed: int = 0, **method_params):
        self.num_parts = check_num_parts(num_parts)
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) \
                or seed < 0:
            raise PartitionError(f"seed must be a non-negative integer, got {seed!r}")
        self.seed = int(seed)
        unknown = sorted(set(method_params) - set(self.defaults))
        if unknown:
            valid = ", ".join(sorted(self.defaults)) or "none"
            raise PartitionError(
                f"unknown parameter {unknown[0]!r} for partitioner {self.name!r} "
                f"(valid: num_parts, seed, {valid})")
        self.method_params = {**self.defaults, **method_params}
        self._check_params()

    def _check_params(self) -> None:
        """Hook for subclasses: validate ``self.method_params`` (raise PartitionError)."""

    def get_params(self) -> dict:
        """All parameters, JSON-friendly (tuples become lists)."""
        params = {"num_parts": self.num_parts, "seed": self.seed, **self.method_params}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def fit(self, graph) -> Partition:
        """Partition ``graph`` (anything :func:`as_csr_graph` accepts; a ``train_mask`` attribute
        is used by balance constraints that need it) and return a :class:`Partition`."""
        csr = as_csr_graph(graph)
        check_num_parts(self.num_parts, csr.num_nodes)
        train_mask = get_train_mask(graph, csr.num_nodes)
        started_tracing = not tracemalloc.is_tracing()
        if started_tracing:
            tracemalloc.start()
        else:
            tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        t0 = time.perf_counter()
        try:
            node_parts, edge_parts = self._partition(csr, train_mask)
            elapsed = time.perf_counter() - t0
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            if started_tracing:
                tracemalloc.stop()
        part = Partition(kind=self.kind, num_parts=self.num_parts, num_nodes=csr.num_nodes,
                         node_parts=node_parts, edge_parts=edge_parts, method=self.name,
                         params=self.get_params(), time_s=elapsed,
                         peak_memory_bytes=int(max(peak, 0)))
        return part.validate(csr)

    @abstractmethod
    def _partition(self, graph: CSRGraph, train_mask: np.ndarray | None):
        """Return ``(node_parts int[N], edge_parts int[E] or None)`` for a validated graph."""
