"""OGB node-property-prediction folders, as the ``ogb`` package writes them on disk.

Layout (``<dataset>/`` is e.g. ``ogbn_arxiv/``; ``.csv`` without ``.gz`` is accepted too)::

    <dataset>/raw/edge.csv.gz            E lines "src,dst" (no header)
    <dataset>/raw/num-node-list.csv.gz   one line: N (optional: else from features or edges)
    <dataset>/raw/node-feat.csv.gz       N lines of F comma-separated floats (optional)
    <dataset>/raw/node-label.csv.gz      N lines, one class id (``nan`` = unlabeled)
    <dataset>/split/<scheme>/{train,valid,test}.csv.gz   node ids, one per line

The split folder found is used; where there are several (``split/time``, ``split/random``),
``scheme=`` picks one. Edges are made undirected by default, as GNN training on OGB node tasks
usually does (the ``ogb`` loader itself adds reverse edges only for some datasets, e.g.
``ogbn-products``); ``symmetrize=False`` keeps them as listed. Multi-label datasets
(``ogbn-proteins``) and heterogeneous ones (``ogbn-mag``) are not supported. Without
``node-feat`` the features are generated (:func:`gnnscale.data.features.synthetic_node_data`).

The CSV files are parsed by :func:`gnnscale.data.csv_table.read_csv_table` (compiled parsers
window by window, straight into int64 ids and float32 features); the feature table is read
in a background thread while the edges become the CSR when all of it fits in memory at once
(:mod:`gnnscale.data.background`). Labels that are ``nan`` mark unlabelled nodes (``y = -1``);
a split that lists one is refused. The binary
layout of the large sets (``ogbn-papers100M`` from ``papers100M-bin.zip``: ``raw/data.npz``,
``raw/node-label.npz``) is read by :mod:`gnnscale.data.ogb_binary`; :func:`load_ogb` hands
such a folder to it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from gnnscale.data.background import BackgroundRead, overlap_fits
from gnnscale.data.csv_table import first_line, read_csv_table
from gnnscale.data.graph_data import GraphData
from gnnscale.data.node_labels import class_ids
from gnnscale.data.ogb_binary import load_ogb_binary
from gnnscale.data.ogb_common import (assemble, check_split, edges_to_csr, find_csv,
                                      held_while_building, is_binary_layout, read_split)
from gnnscale.errors import DataError


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
    edge_file = find_csv(raw, "edge")
    if edge_file is None and is_binary_layout(folder):
        return load_ogb_binary(folder, split=split, scheme=scheme, symmetrize=symmetrize,
                               num_classes=num_classes, name=name)
    if edge_file is None:
        raise DataError(f"OGB folder {folder} has no raw/edge.csv.gz (nor raw/data.npz)")
    check_split(split)
    split_ids = read_split(folder, scheme)  # first: a missing split fails before the big files
    label_file = find_csv(raw, "node-label")
    if label_file is None:
        raise DataError(f"OGB folder {folder} has no raw/node-label.csv.gz (node labels)")
    num_nodes = _single_count(raw, "num-node-list")
    num_edges = _single_count(raw, "num-edge-list")
    labels = read_csv_table(label_file, np.float64, rows=_hint(num_nodes, label_file))
    if num_nodes is None:
        num_nodes = labels.shape[0]
    y = class_ids(labels, num_nodes, str(label_file))
    del labels
    feat_file = find_csv(raw, "node-feat")
    feature_rows = _hint(num_nodes, feat_file) if feat_file is not None else None
    overlap = feat_file is not None and overlap_fits(
        num_nodes * (first_line(feat_file).count(b",") + 1) * 4
        + held_while_building(num_edges or _lines_at_most(edge_file), num_nodes, symmetrize))
    # The feature table (the largest file) parses in a background thread while this one reads
    # the edges and builds the CSR, when all of it fits at once (see gnnscale.data.background).
    with BackgroundRead(read_csv_table, feat_file, np.float32, rows=feature_rows,
                        overlap=overlap) as feature_job:
        edges = read_csv_table(edge_file, np.int64, columns=2, order="F",
                               rows=_hint(num_edges, edge_file))
        if num_edges is not None and edges.shape[0] != num_edges:
            raise DataError(f"{edge_file} has {edges.shape[0]} edges but {raw}/num-edge-list "
                            f"says {num_edges}")
        indptr, indices = edges_to_csr(edges[:, 0], edges[:, 1], num_nodes, symmetrize,
                                       edge_file)
        del edges
        features = feature_job.result()
    return assemble(folder, indptr, indices, features, y, split_ids, name=name,
                    num_classes=num_classes, feature_source=f"{raw}/node-feat")


def _single_count(raw: Path, stem: str) -> int | None:
    """The one number in ``raw/<stem>.csv[.gz]`` (None when the file is absent)."""
    found = find_csv(raw, stem)
    if found is None:
        return None
    counts = read_csv_table(found, np.int64)
    if counts.size != 1:
        raise DataError(f"{found} holds {counts.size} numbers; only single-graph node-property "
                        "datasets are supported")
    if counts.ravel()[0] < 0:
        raise DataError(f"{found} holds a negative count {int(counts.ravel()[0])}")
    return int(counts.ravel()[0])


def _lines_at_most(path: Path) -> int:
    """A generous line count for a CSV of ids: 4 bytes per line, 1 gzipped (real ones hold
    more: R-MAT 21's edge.csv.gz holds 4.7 gzipped bytes per line)."""
    size = os.path.getsize(path)
    return size if path.name.endswith(".gz") else size // 4


def _hint(rows: int | None, path: Path) -> int | None:
    """``rows`` as a preallocation size, unless the file is too small to hold that many lines."""
    if rows is None:
        return None
    size = os.path.getsize(path)
    most = size * 1100 // 2 if path.name.endswith(".gz") else size // 2  # deflate: <= 1032:1
    return min(rows, most)
