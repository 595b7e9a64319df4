"""The interchange ``.npz`` people write with ``np.savez`` from a PyG ``Data`` object.

Arrays (names as PyG's ``Data`` attributes)::

    edge_index  int [2, E]     row 0 sources, row 1 destinations (required)
    x           number [N, F]  node features (required)
    y           int [N] or [N, 1]; -1 (or NaN in a float y) = unlabelled (required)
    train_mask, val_mask, test_mask   bool [N], or [N, S] for S splits as PyG stores them
                (``split`` picks a column); all three or none: without them a seeded 50/25/25
                split of the labelled nodes is drawn (``split`` varies its seed)
    num_nodes   scalar (optional; must equal x's rows)

for example ``np.savez(path, edge_index=d.edge_index.numpy(), x=d.x.numpy(), y=d.y.numpy(),
train_mask=d.train_mask.numpy(), ...)``. Other arrays (``edge_attr``, ...) are ignored.

Edges are made undirected by default (every reverse edge added, duplicates removed), as the
heterophilous and OGB loaders do; PyG's own undirected datasets already list both directions,
so for them this only drops duplicate entries. ``symmetrize=False`` keeps the edges exactly as
listed (directed graphs such as ogbn-arxiv's citation direction).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gnnscale.data.graph_data import GraphData
from gnnscale.data.node_labels import class_ids
from gnnscale.data.npz import open_npz, require
from gnnscale.data.splits import MASK_KEYS, stored_or_drawn_split
from gnnscale.errors import DataError

PYG_KEYS = ("edge_index", "x", "y")


def is_pyg_npz(keys) -> bool:
    """Whether the array names of an npz say it is the PyG interchange layout."""
    return "edge_index" in keys and "x" in keys


def load_pyg_npz(path, *, split: int = 0, symmetrize: bool = True, seed: int = 0,
                 num_classes: int | None = None, name: str | None = None) -> GraphData:
    """Load a PyG-style ``.npz`` (see the module docstring for the arrays).

    Args:
        split: the mask column where masks are ``[N, S]``, else the seed of the drawn split.
        symmetrize: add reverse edges (default) or keep the listed direction.
        seed: seed of the drawn split when the file has no masks.
        num_classes: override ``max label + 1``.
        name: dataset name; defaults to the file name without ``.npz``.
    """
    path = Path(path)
    with open_npz(path) as arrays:
        require(arrays, PYG_KEYS, path, "PyG")
        edge_index, x, y = arrays["edge_index"], arrays["x"], arrays["y"]
        found = [key for key in MASK_KEYS if key in arrays]
        masks = [arrays[key] for key in found]
        declared = arrays["num_nodes"] if "num_nodes" in arrays else None
    if x.ndim != 2 or x.dtype.kind not in "biuf":
        raise DataError(f"{path}: x must be a numeric [N, F] array, got {x.dtype} {list(x.shape)}")
    n = x.shape[0]
    if declared is not None:
        if declared.size != 1 or declared.dtype.kind not in "iu" or int(declared.ravel()[0]) != n:
            raise DataError(f"{path}: num_nodes {declared.ravel().tolist()} does not match x's "
                            f"{n} rows")
    if edge_index.ndim != 2 or edge_index.shape[0] != 2 or \
            (edge_index.size and edge_index.dtype.kind not in "iu"):
        raise DataError(f"{path}: edge_index must be an integer [2, E] array, got "
                        f"{edge_index.dtype} {list(edge_index.shape)}"
                        + (" (transpose an [E, 2] list)" if edge_index.ndim == 2
                           and edge_index.shape[1] == 2 else ""))
    labels = class_ids(y, n, f"{path} y")
    masks = stored_or_drawn_split(found, masks,
                                  lambda mask, key: _pick(mask, key, split, n, path),
                                  num_nodes=n, split=split, seed=seed, labeled=labels >= 0,
                                  origin=path)
    try:
        return GraphData.from_edge_index(edge_index, n, x, labels, *masks,
                                         name=name or path.name[:-4], symmetrize=symmetrize,
                                         num_classes=num_classes).validate()
    except DataError as exc:
        raise DataError(f"{path}: {exc}") from None


def _pick(mask: np.ndarray, key: str, split: int, n: int, origin: Path) -> np.ndarray:
    """Column ``split`` of an ``[N, S]`` mask, or the ``[N]`` mask itself (split 0)."""
    if mask.dtype.kind not in "bui":
        raise DataError(f"{origin}: {key} must be boolean, got {mask.dtype}")
    if mask.dtype.kind != "b" and mask.size and not np.isin(mask, (0, 1)).all():
        raise DataError(f"{origin}: {key} must hold only 0/1 or booleans")
    if mask.shape == (n,):
        if split != 0:
            raise DataError(f"{origin}: {key} holds one split; split={split} does not exist")
        return mask.astype(bool)
    if mask.ndim == 2 and mask.shape[0] == n:
        if not 0 <= split < mask.shape[1]:
            raise DataError(f"{origin}: {key} holds {mask.shape[1]} splits (columns); "
                            f"split={split} is out of range")
        return mask[:, split].astype(bool)
    raise DataError(f"{origin}: {key} must have shape [N={n}] or [N, splits], got "
                    f"{list(mask.shape)}")
