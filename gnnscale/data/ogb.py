"""OGB node-property-prediction folders, as the ``ogb`` package writes them on disk.

Layout (``<dataset>/`` is e.g. ``ogbn_arxiv/``; ``.csv`` without ``.gz`` is accepted too)::

    <dataset>/raw/edge.csv.gz            E lines "src,dst" (no header)
    <dataset>/raw/num-node-list.csv.gz   one line: N (optional: else from features or edges)
    <dataset>/raw/node-feat.csv.gz       N lines of F comma-separated floats (optional)
    <dataset>/raw/node-label.csv.gz      N lines, one class id (``nan`` = unlabeled)
    <dataset>/split/<scheme>/{train,valid,test}.csv.gz   node ids, one per line

or the binary layout of the large sets (``ogbn-papers100M``, from ``papers100M-bin.zip``)::

    <dataset>/raw/data.npz         edge_index [2, E], node_feat [N, F], num_nodes_list [1], ...
    <dataset>/raw/node-label.npz   node_label [N, 1] (``nan`` = unlabeled)

The split folder found is used; where there are several (``split/time``, ``split/random``),
``scheme=`` picks one. Edges are made undirected by default, as GNN training on OGB node tasks
usually does (the ``ogb`` loader itself adds reverse edges only for some datasets, e.g.
``ogbn-products``); ``symmetrize=False`` keeps them as listed. Multi-label datasets
(``ogbn-proteins``) and heterogeneous ones (``ogbn-mag``) are not supported. Without
``node-feat`` the features are generated (:func:`gnnscale.data.features.synthetic_node_data`).
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
from gnnscale.data.npz import open_npz, require
from gnnscale.errors import DataError

_SPLIT_FILES = ("train", "valid", "test")


def _find(folder: Path, stem: str) -> Path | None:
    for suffix in (".csv.gz", ".csv"):
        if (folder / f"{stem}{suffix}").is_file():
            return folder / f"{stem}{suffix}"
    return None


def read_csv(path: Path, dtype, *, columns: int | None = None) -> np.ndarray:
    """Read a header-less comma-separated numeric table (gzip by name) as a 2-D array."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = np.loadtxt(handle, dtype=dtype, delimiter=",", ndmin=2, comments=None)
    except (OSError, EOFError, ValueError, UnicodeDecodeError, zlib.error, OverflowError) as exc:
        raise DataError(f"{path} is not a readable numeric CSV table ({type(exc).__name__}: "
                        f"{exc})") from None
    if columns is not None and table.shape[0] == 0:
        return table.reshape(0, columns)
    if columns is not None and table.shape[1] != columns:
        raise DataError(f"{path} should have {columns} column(s), found {table.shape[1]}")
    return table


def split_schemes(folder) -> list[str]:
    """Names of the split folders under ``<folder>/split`` (sorted)."""
    split_dir = Path(folder) / "split"
    if not split_dir.is_dir():
        return []
    return sorted(d.name for d in split_dir.iterdir() if d.is_dir() and _find(d, "train"))


def load_ogb(path, *, split: int = 0, scheme: str | None = None, symmetrize: bool = True,
             num_classes: int | None = None, name: str | None = None) -> GraphData:
    """Load an OGB node-property folder (the one holding ``raw/`` and ``split/``).

    Args:
        split: must be 0 (each OGB scheme defines one split); choose schemes with ``scheme``.
        scheme: split folder name under ``split/``; needed only when there are several.
        symmetrize: add reverse edges (default) or keep the listed direction.
        num_classes: override ``max label + 1``.
        name: dataset name; defaults to the folder name (``ogbn_arxiv`` -> ``ogbn-arxiv``).
    """
    folder = Path(path)
    raw = folder / "raw"
    edge_file = _find(raw, "edge")
    binary = edge_file is None and (raw / "data.npz").is_file()
    if edge_file is None and not binary:
        raise DataError(f"OGB folder {folder} has no raw/edge.csv.gz (nor raw/data.npz)")
    if split != 0:
        raise DataError(f"OGB datasets have one split per scheme; split={split} does not exist "
                        "(pick a scheme with scheme=NAME)")
    train_ids, val_ids, test_ids = _read_split(folder, scheme)

    if binary:
        edges, features, labels, counts, label_file = _read_binary(raw)
    else:
        edges = read_csv(edge_file, np.int64, columns=2)
        features = _optional(raw, "node-feat", np.float32)
        label_file = _find(raw, "node-label")
        if label_file is None:
            raise DataError(f"OGB folder {folder} has no raw/node-label.csv.gz (node labels)")
        labels = read_csv(label_file, np.float64)
        counts = _optional(raw, "num-node-list", np.int64)
    if labels.shape[1] != 1:
        raise DataError(f"{label_file} has {labels.shape[1]} label columns; multi-label "
                        "datasets (e.g. ogbn-proteins) are not supported")
    labels = labels[:, 0]
    if counts is not None and counts.size != 1:
        raise DataError(f"{raw}/num-node-list holds {counts.size} numbers; only single-graph "
                        "node-property datasets are supported")
    num_nodes = int(counts.ravel()[0]) if counts is not None else labels.shape[0]
    if labels.shape[0] != num_nodes:
        raise DataError(f"{label_file} has {labels.shape[0]} rows but the graph has "
                        f"{num_nodes} nodes")
    labeled = np.isfinite(labels)
    if np.any(labels[labeled] != np.floor(labels[labeled])) or np.any(labels[labeled] < 0):
        raise DataError(f"{label_file} must hold non-negative integer class ids or nan")
    y = np.where(labeled, labels, -1).astype(np.int64)

    masks = []
    for kind, ids in zip(_SPLIT_FILES, (train_ids, val_ids, test_ids)):
        if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
            bad = ids.min() if ids.min() < 0 else ids.max()
            raise DataError(f"OGB split {kind} lists node {int(bad)}, outside [0, {num_nodes})")
        mask = np.zeros(num_nodes, dtype=bool)
        mask[ids] = True
        masks.append(mask)

    indptr, indices = csr_by_destination(edges[:, 0], edges[:, 1], num_nodes,
                                         symmetrize=symmetrize)
    if features is None:
        classes = int(y.max()) + 1 if y.size and y.max() >= 0 else 1
        features = synthetic_node_data(indptr, indices, num_classes=classes)[0]
    elif features.shape[0] != num_nodes:
        raise DataError(f"{raw}/node-feat has {features.shape[0]} rows but the graph has "
                        f"{num_nodes} nodes")
    return GraphData(indptr, indices, features, y, *masks,
                     name=name or folder.name.replace("_", "-"),
                     num_classes=num_classes).validate()


def _read_binary(raw: Path):
    """``(edges [E, 2], features or None, labels [N, 1], node counts, label file)`` from the
    binary layout (``raw/data.npz`` + ``raw/node-label.npz``)."""
    data_file, label_file = raw / "data.npz", raw / "node-label.npz"
    with open_npz(data_file) as arrays:
        require(arrays, ("edge_index",), data_file, "OGB binary")
        edge_index = np.asarray(arrays["edge_index"], dtype=np.int64)
        features = np.asarray(arrays["node_feat"], dtype=np.float32) \
            if "node_feat" in arrays else None
        counts = np.asarray(arrays["num_nodes_list"], dtype=np.int64) \
            if "num_nodes_list" in arrays else None
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise DataError(f"{data_file}: edge_index should have shape [2, E], found "
                        f"{list(edge_index.shape)}")
    with open_npz(label_file) as arrays:
        require(arrays, ("node_label",), label_file, "OGB binary")
        labels = np.asarray(arrays["node_label"], dtype=np.float64)
    return edge_index.T, features, labels.reshape(labels.shape[0], -1), counts, label_file


def _optional(raw: Path, stem: str, dtype):
    found = _find(raw, stem)
    return None if found is None else read_csv(found, dtype)


def _read_split(folder: Path, scheme: str | None):
    schemes = split_schemes(folder)
    split_dir = folder / "split"
    if scheme is not None:
        if scheme not in schemes:
            raise DataError(f"OGB folder {folder} has no split scheme {scheme!r} (found: "
                            f"{', '.join(schemes) or 'none'})")
        chosen = split_dir / scheme
    elif len(schemes) == 1:
        chosen = split_dir / schemes[0]
    elif schemes:
        raise DataError(f"OGB folder {folder} has several split schemes ({', '.join(schemes)}); "
                        "choose one with scheme=NAME")
    elif _find(split_dir, "train"):
        chosen = split_dir
    else:
        raise DataError(f"OGB folder {folder} has no split/<scheme>/train.csv.gz")
    ids = []
    for kind in _SPLIT_FILES:
        file = _find(chosen, kind)
        if file is None:
            raise DataError(f"OGB split folder {chosen} is missing {kind}.csv.gz")
        ids.append(read_csv(file, np.int64, columns=1).ravel())
    return ids
