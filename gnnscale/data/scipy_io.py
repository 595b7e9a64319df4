"""Scipy sparse adjacency files (``scipy.sparse.save_npz``) with an optional node-data sidecar.

Format (written by :func:`save_scipy`, read by :func:`load_scipy`):

- ``<name>.npz``: the adjacency matrix as ``scipy.sparse.save_npz`` writes it (any of csr, csc,
  coo, ...), square ``N x N``; a stored nonzero ``A[u, v]`` is the edge ``u -> v`` (row =
  source, the usual adjacency convention). Values are ignored apart from being nonzero, so
  weights and repeated entries give one edge.
- ``<name>.nodes.npz`` (optional sidecar next to it), plain arrays, no pickles: ``x`` float
  ``[N, F]``, ``y`` int ``[N]`` (-1 for unlabeled), and optionally ``train_mask``, ``val_mask``,
  ``test_mask``, bool ``[N]`` or ``[S, N]`` for ``S`` splits (``split`` picks one), and
  ``num_classes`` (a scalar).

Without a sidecar the node data are generated as for SNAP graphs
(:func:`gnnscale.data.features.synthetic_node_data`); with ``x`` and ``y`` but no masks, a
seeded 50/25/25 random split of the labeled nodes is drawn.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gnnscale.data.features import synthetic_node_data
from gnnscale.data.graph_data import GraphData
from gnnscale.data.npz import open_npz
from gnnscale.data.splits import MASK_KEYS, stored_or_drawn_split
from gnnscale.errors import DataError



def sidecar_path(path) -> Path:
    """The node-data sidecar of adjacency file ``path``: ``graph.npz`` -> ``graph.nodes.npz``."""
    path = Path(path)
    stem = path.name[:-4] if path.name.endswith(".npz") else path.name
    return path.with_name(f"{stem}.nodes.npz")


def save_scipy(data: GraphData, path) -> tuple[Path, Path]:
    """Write ``data`` as ``path`` (CSR adjacency, row = source) plus its ``.nodes.npz`` sidecar."""
    path = Path(path)
    src, dst = data.edge_index()
    adjacency = sp.csr_matrix((np.ones(src.size, dtype=np.float32), (src, dst)),
                              shape=(data.num_nodes, data.num_nodes))
    sp.save_npz(path, adjacency)
    nodes = sidecar_path(path)
    np.savez(nodes, x=data.x, y=data.y, train_mask=data.train_mask, val_mask=data.val_mask,
             test_mask=data.test_mask, num_classes=np.int64(data.num_classes))
    return path, nodes


def load_adjacency(path) -> sp.csc_matrix:
    """Read a ``save_npz`` matrix as a canonical CSC matrix (columns = destinations)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"adjacency file {path} does not exist")
    try:
        matrix = sp.load_npz(path)
        matrix = sp.csc_matrix(matrix)
        matrix.eliminate_zeros()
        matrix.sum_duplicates()
        matrix.check_format(full_check=True)
    except DataError:
        raise
    except Exception as exc:  # zip, format, shape and index errors from scipy
        raise DataError(f"{path} is not a readable scipy.sparse.save_npz matrix "
                        f"({type(exc).__name__}: {exc})") from None
    if matrix.shape[0] != matrix.shape[1]:
        raise DataError(f"{path}: adjacency must be square, got shape {matrix.shape}")
    return matrix


def load_scipy(path, *, split: int = 0, symmetrize: bool = False, num_classes: int = 4,
               num_features: int | None = None, seed: int = 0,
               name: str | None = None) -> GraphData:
    """Load a scipy sparse adjacency ``.npz`` and its optional ``.nodes.npz`` sidecar.

    Args:
        split: which split where the sidecar masks are ``[S, N]``, or which generated split.
        symmetrize: add every reverse edge (duplicates removed).
        num_classes, num_features, seed: for generated node data when there is no sidecar.
        name: dataset name; defaults to the file name without ``.npz``.
    """
    path = Path(path)
    adjacency = load_adjacency(path)
    if symmetrize:
        adjacency = sp.csc_matrix(adjacency + adjacency.T)
        adjacency.sum_duplicates()
    adjacency.sort_indices()
    # CSC of A (row = source) is exactly the CSR by destination of the graph.
    indptr = adjacency.indptr.astype(np.int64)
    indices = adjacency.indices.astype(np.int64)
    n = adjacency.shape[0]
    name = name or (path.name[:-4] if path.name.endswith(".npz") else path.name)
    nodes = sidecar_path(path)
    if not nodes.is_file():
        x, y, *masks = synthetic_node_data(indptr, indices, num_classes=num_classes,
                                           num_features=num_features, seed=seed, split=split)
        return GraphData(indptr, indices, x, y, *masks, name=name,
                         num_classes=num_classes).validate()
    with open_npz(nodes) as arrays:
        for key in ("x", "y"):
            if key not in arrays:
                raise DataError(f"{nodes} lacks {key!r}; a node-data sidecar needs x and y")
        x, y = arrays["x"], arrays["y"]
        found = [key for key in MASK_KEYS if key in arrays]
        masks = [arrays[key] for key in found]
        classes = int(arrays["num_classes"]) if "num_classes" in arrays else None
    if x.ndim != 2 or x.shape[0] != n or y.shape != (n,):
        raise DataError(f"{nodes}: x {x.shape} and y {y.shape} must have N={n} rows (the "
                        f"adjacency of {path.name} is {n} x {n})")
    if y.dtype.kind not in "iu" or x.dtype.kind not in "fiub":
        raise DataError(f"{nodes}: y must hold integer classes and x numbers, got {y.dtype}, "
                        f"{x.dtype}")
    masks = stored_or_drawn_split(found, masks,
                                  lambda mask, key: _pick(mask, key, split, n, nodes),
                                  num_nodes=n, split=split, seed=seed, labeled=y >= 0,
                                  origin=nodes)
    return GraphData(indptr, indices, x.astype(np.float32), y.astype(np.int64),
                     *[m.astype(bool) for m in masks], name=name,
                     num_classes=classes).validate()


def _pick(mask: np.ndarray, key: str, split: int, n: int, origin: Path) -> np.ndarray:
    if mask.shape == (n,):
        if split != 0:
            raise DataError(f"{origin}: {key} holds one split; split={split} does not exist")
        return mask
    if mask.ndim == 2 and mask.shape[1] == n:
        if not 0 <= split < mask.shape[0]:
            raise DataError(f"{origin}: {key} holds {mask.shape[0]} splits; split={split} is "
                            f"out of range")
        return mask[split]
    raise DataError(f"{origin}: {key} must have shape [N={n}] or [splits, N], got {mask.shape}")
