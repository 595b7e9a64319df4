"""The graph container every loader returns and every consumer (partitioners, engine) reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gnnscale.data._csr import csr_by_destination
from gnnscale.data.pyg_io import pyg_arrays
from gnnscale.errors import DataError

_MASKS = ("train_mask", "val_mask", "test_mask")


@dataclass(eq=False)  # arrays: compare fields with numpy, not ==
class GraphData:
    """A graph in CSR by destination (row v lists the sources u of edges u->v), with node data.

    Attributes:
        indptr: int64 ``[N + 1]``, row pointers; the sources of node ``v`` are
            ``indices[indptr[v]:indptr[v + 1]]``.
        indices: int64 ``[E]``, source node ids in CSR order.
        x: float32 ``[N, F]`` node features.
        y: int64 ``[N]`` class ids; ``-1`` marks an unlabeled node.
        train_mask, val_mask, test_mask: bool ``[N]``, disjoint node sets.
        name: a label used in summaries and logs.
        num_classes: number of classes; ``y.max() + 1`` (0 if no node is labeled) when ``None``.
        node_stats: optional precomputed int64 ``[N]`` arrays ``out_degree`` and ``self_loops``
            (a converted graph stores them; partitioning and part building reuse them).
        mapped_from: the converted folder the arrays are memory-mapped from, if any.

    The constructor does not copy or convert arrays; call :meth:`validate` to check them.
    Undirected graphs store each edge in both directions (two CSR entries).
    """

    indptr: np.ndarray
    indices: np.ndarray
    x: np.ndarray
    y: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    name: str = "graph"
    num_classes: int | None = None
    node_stats: dict | None = field(default=None, repr=False)
    mapped_from: Path | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.num_classes is None:
            y = np.asarray(self.y)
            self.num_classes = int(y.max()) + 1 if y.size and y.max() >= 0 else 0
        self.num_classes = int(self.num_classes)

    @property
    def num_nodes(self) -> int:
        """Number of nodes ``N`` (``len(indptr) - 1``)."""
        return int(len(self.indptr)) - 1

    @property
    def num_edges(self) -> int:
        """Number of directed edges (CSR entries) ``E``."""
        return int(len(self.indices))

    @property
    def num_features(self) -> int:
        """Feature width ``F``."""
        return int(self.x.shape[1]) if np.ndim(self.x) == 2 else 0

    @classmethod
    def from_edge_index(cls, edge_index, num_nodes, x, y, train_mask, val_mask, test_mask,
                        name: str = "graph", symmetrize: bool = False,
                        num_classes: int | None = None) -> "GraphData":
        """Build a :class:`GraphData` from a ``(2, E)`` edge list (row 0 source, row 1 destination).

        Arrays are converted to the canonical dtypes (int64 CSR, float32 ``x``, int64 ``y``, bool
        masks). Within one destination, sources keep their input order (stable). With
        ``symmetrize=True`` every reverse edge is added and duplicates are removed (self loops
        kept once). Ids outside ``[0, num_nodes)`` raise :class:`DataError`.
        """
        edge_index = np.asarray(edge_index)
        if edge_index.ndim != 2 or edge_index.shape[0] != 2:
            raise DataError(f"edge_index must have shape (2, E), got {edge_index.shape}")
        if edge_index.size and not np.issubdtype(edge_index.dtype, np.integer):
            raise DataError(f"edge_index must hold integers, got dtype {edge_index.dtype}")
        for field, array in (("x", x), ("y", y)):
            kind = np.asarray(array).dtype.kind
            if kind not in "biuf":  # strings or objects: astype would crash or guess
                raise DataError(f"{field} must hold numbers, got dtype {np.asarray(array).dtype}")
        indptr, indices = csr_by_destination(edge_index[0], edge_index[1], num_nodes,
                                             symmetrize=symmetrize)
        return cls(indptr=indptr, indices=indices,
                   x=np.ascontiguousarray(x, dtype=np.float32),
                   y=np.ascontiguousarray(y, dtype=np.int64),
                   train_mask=np.ascontiguousarray(train_mask, dtype=bool),
                   val_mask=np.ascontiguousarray(val_mask, dtype=bool),
                   test_mask=np.ascontiguousarray(test_mask, dtype=bool),
                   name=name, num_classes=num_classes)

    def edge_index(self) -> np.ndarray:
        """The edges as a ``(2, E)`` int64 array ``[src; dst]`` in CSR order."""
        dst = np.repeat(np.arange(self.num_nodes, dtype=np.int64), np.diff(self.indptr))
        return np.stack([np.asarray(self.indices, dtype=np.int64), dst])

    def in_degrees(self) -> np.ndarray:
        """Number of incoming edges of every node, int64 ``[N]``."""
        return np.diff(self.indptr)

    def validate(self) -> "GraphData":
        """Check shapes, dtypes and value ranges; return ``self`` or raise :class:`DataError`."""
        where = f"graph {self.name!r}"
        for field, dtype in _EXPECTED.items():
            value = getattr(self, field)
            if not isinstance(value, np.ndarray):
                raise DataError(f"{where}: {field} must be a numpy array, got "
                                f"{type(value).__name__}")
            if value.dtype != dtype:
                raise DataError(f"{where}: {field} has dtype {value.dtype}; expected {dtype} "
                                "(GraphData.from_edge_index converts for you)")
        if self.indptr.ndim != 1 or self.indptr.size < 1:
            raise DataError(f"{where}: indptr must be 1-D with N+1 >= 1 entries, "
                            f"got shape {self.indptr.shape}")
        n, e = self.num_nodes, self.num_edges
        if self.indices.ndim != 1:
            raise DataError(f"{where}: indices must be 1-D, got shape {self.indices.shape}")
        if self.indptr[0] != 0 or self.indptr[-1] != e:
            raise DataError(f"{where}: indptr must start at 0 and end at len(indices)={e}, "
                            f"got {int(self.indptr[0])}..{int(self.indptr[-1])}")
        if n and np.any(np.diff(self.indptr) < 0):
            raise DataError(f"{where}: indptr decreases at row "
                            f"{int(np.argmax(np.diff(self.indptr) < 0))}")
        if e and (self.indices.min() < 0 or self.indices.max() >= n):
            bad = self.indices.min() if self.indices.min() < 0 else self.indices.max()
            raise DataError(f"{where}: edge source id {int(bad)} is outside [0, {n})")
        if self.x.ndim != 2 or self.x.shape[0] != n:
            raise DataError(f"{where}: x must have shape [N={n}, F], got {self.x.shape}")
        if not np.isfinite(self.x).all():
            row = int(np.argwhere(~np.isfinite(self.x))[0, 0])
            raise DataError(f"{where}: x has NaN or Inf values (first in row {row})")
        if self.y.shape != (n,):
            raise DataError(f"{where}: y must have shape [N={n}], got {self.y.shape}")
        if n and (self.y.min() < -1 or self.y.max() >= self.num_classes):
            bad = self.y.min() if self.y.min() < -1 else self.y.max()
            raise DataError(f"{where}: label {int(bad)} is outside [-1, num_classes="
                            f"{self.num_classes}); use -1 for unlabeled nodes")
        for field in _MASKS:
            mask = getattr(self, field)
            if mask.shape != (n,):
                raise DataError(f"{where}: {field} must have shape [N={n}], got {mask.shape}")
        if not self.train_mask.any():
            raise DataError(f"{where}: train_mask is empty; at least one training node is needed")
        for a, b in (("train_mask", "val_mask"), ("train_mask", "test_mask"),
                     ("val_mask", "test_mask")):
            both = getattr(self, a) & getattr(self, b)
            if both.any():
                raise DataError(f"{where}: {a} and {b} overlap in {int(both.sum())} nodes "
                                f"(first {int(np.argmax(both))}); splits must be disjoint")
        for field in _MASKS:
            unlabeled = getattr(self, field) & (self.y < 0)
            if unlabeled.any():
                raise DataError(f"{where}: {field} contains {int(unlabeled.sum())} unlabeled "
                                f"nodes (y == -1, first {int(np.argmax(unlabeled))})")
        return self

    def to_pyg(self):
        """Return a ``torch_geometric.data.Data`` with edge_index, x, y and the three masks."""
        import torch
        from torch_geometric.data import Data

        return Data(edge_index=torch.from_numpy(self.edge_index()),
                    x=torch.from_numpy(np.ascontiguousarray(self.x)),
                    y=torch.from_numpy(np.ascontiguousarray(self.y)),
                    train_mask=torch.from_numpy(np.ascontiguousarray(self.train_mask)),
                    val_mask=torch.from_numpy(np.ascontiguousarray(self.val_mask)),
                    test_mask=torch.from_numpy(np.ascontiguousarray(self.test_mask)),
                    num_nodes=self.num_nodes)

    @classmethod
    def from_pyg(cls, data, name: str = "graph", *, split: int = 0) -> "GraphData":
        """Build a validated :class:`GraphData` from a ``torch_geometric.data.Data``.

        Reads ``edge_index`` (``[2, E]``, source row first), ``x`` (dense or sparse), ``y`` (a
        one-dimensional class vector; ``[N, 1]`` is flattened) and ``train_mask``/``val_mask``/
        ``test_mask``; ``[N, S]`` masks hold several splits and column ``split`` is taken. Edges
        are kept as they are (not symmetrised). Missing ``x``, ``y`` or masks raise
        :class:`DataError`: use :func:`gnnscale.data.features.synthetic_node_data` to make them for
        structure-only graphs (:func:`gnnscale.data.pyg_io.pyg_arrays` reads the arrays).
        """
        edge_index, num_nodes, x, y, *masks = pyg_arrays(data, name, split=split)
        return cls.from_edge_index(edge_index, num_nodes, x, y, *masks, name=name).validate()

    def summary(self) -> str:
        """One line: name, nodes, edges, features, classes and the train/val/test counts."""
        return (f"{self.name}: {self.num_nodes:,} nodes, {self.num_edges:,} edges, "
                f"{self.num_features} features, {self.num_classes} classes, train/val/test "
                f"{int(self.train_mask.sum())}/{int(self.val_mask.sum())}/"
                f"{int(self.test_mask.sum())}")

    def __repr__(self) -> str:
        return f"GraphData({self.summary()})"


_EXPECTED = {"indptr": "int64", "indices": "int64", "x": "float32", "y": "int64",
             "train_mask": "bool", "val_mask": "bool", "test_mask": "bool"}
