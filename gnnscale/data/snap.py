"""SNAP edge lists (``.txt``, ``.txt.gz``): ``#`` comment lines, then ``src<whitespace>dst`` lines.

SNAP graphs carry only structure; features, labels and a split are generated from it by
:func:`gnnscale.data.features.synthetic_node_data` (seeded, documented there).
"""

from __future__ import annotations

import gzip
import warnings
import zlib
from pathlib import Path

import numpy as np

from gnnscale.data._csr import csr_by_destination
from gnnscale.data.features import synthetic_node_data
from gnnscale.data.graph_data import GraphData
from gnnscale.errors import DataError


# Keeping raw ids allocates per-id arrays up to the largest id; beyond this, relabel.
_MAX_KEPT_IDS = 1 << 31


def read_edge_list(path, *, comments: str = "#", delimiter=None) -> np.ndarray:
    """Read the first two integer columns of a text edge list (gzip if the name ends in ``.gz``).

    Returns an int64 ``[E, 2]`` array; further columns (weights, timestamps) are ignored.
    Unreadable, non-integer or negative ids raise :class:`DataError` naming the file.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"edge list {path} does not exist")
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data" for empty files
            edges = np.loadtxt(handle, dtype=np.int64, comments=comments,
                               delimiter=delimiter, usecols=(0, 1), ndmin=2)
    except (OSError, EOFError, ValueError, UnicodeDecodeError, zlib.error, IndexError,
            OverflowError) as exc:
        raise DataError(f"{path} is not a readable edge list of integer node ids "
                        f"({type(exc).__name__}: {exc})") from None
    if edges.size and edges.min() < 0:
        raise DataError(f"{path} has a negative node id {int(edges.min())}; ids must be >= 0")
    return edges


def load_snap(path, *, split: int = 0, directed: bool = False, relabel: bool | None = None,
              num_classes: int = 4, num_features: int | None = None, feature_noise: float = 1.0,
              seed: int = 0, name: str | None = None) -> GraphData:
    """Load a SNAP edge list and generate node data for it.

    Args:
        path: ``.txt`` or ``.txt.gz`` (also ``.tsv``, ``.edges``, ``.el``) edge list.
        split: which generated random split (50/25/25) to use.
        directed: keep edges as listed; by default the graph is made undirected (every edge in
            both directions). Self loops and duplicate edges are always removed.
        relabel: map the ids present to ``0..n-1`` in increasing order. ``None`` (default) does
            so only when more than half of ``0..max id`` is unused; otherwise ids are kept and
            unused ids become isolated nodes.
        num_classes, num_features, feature_noise, seed: passed to
            :func:`~gnnscale.data.features.synthetic_node_data`.
        name: dataset name; defaults to the file name without extensions.
    """
    path = Path(path)
    edges = read_edge_list(path)
    if edges.shape[0] == 0:
        raise DataError(f"{path} lists no edges")
    src, dst = edges[:, 0], edges[:, 1]
    num_nodes = int(edges.max()) + 1
    present = np.sort(edges.ravel())  # distinct ids, by sorting (np.unique hashes, slowly)
    if present.size > 1:
        present = present[np.concatenate([[True], present[1:] != present[:-1]])]
    if relabel or (relabel is None and present.size * 2 < num_nodes):
        src, dst = np.searchsorted(present, src), np.searchsorted(present, dst)
        num_nodes = int(present.size)
    elif num_nodes > _MAX_KEPT_IDS:
        raise DataError(f"{path} has node id {num_nodes - 1}; keeping ids that large needs too "
                        "much memory: pass relabel=True to number the nodes 0..n-1")
    del edges
    indptr, indices = csr_by_destination(src, dst, num_nodes, symmetrize=not directed,
                                         remove_duplicates=True, remove_self_loops=True)
    x, y, *masks = synthetic_node_data(indptr, indices, num_classes=num_classes,
                                       num_features=num_features, feature_noise=feature_noise,
                                       seed=seed, split=split)
    return GraphData(indptr=indptr, indices=indices, x=x, y=y, train_mask=masks[0],
                     val_mask=masks[1], test_mask=masks[2], name=name or _stem(path),
                     num_classes=num_classes).validate()


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".txt", ".tsv", ".edges", ".el"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name
