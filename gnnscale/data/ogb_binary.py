"""OGB node-property folders in ``ogb``'s binary layout (``papers100M-bin``).

Layout, as ``ogb.io.DatasetSaver`` writes it and ``ogb.io.read_graph_raw.read_binary_graph_raw``
and ``ogb.nodeproppred.NodePropPredDataset`` read it::

    <dataset>/raw/data.npz         edge_index int [2, E], num_nodes_list [1], num_edges_list [1],
                                   node_feat [N, F] (optional; float16 in ogbn-papers100M),
                                   further node_* / edge_* arrays (ignored: node_year, edge_feat)
    <dataset>/raw/node-label.npz   node_label float [N, 1] (or [N]); NaN = unlabelled node
    <dataset>/split/<scheme>/{train,valid,test}.csv.gz   node ids, one per line

Read as :func:`gnnscale.data.ogb.load_ogb` reads the CSV layout: edges made undirected by
default (``symmetrize=False`` keeps them as listed; ``ogb`` adds no inverse edges for
papers100M), NaN labels -> ``y = -1`` (a split listing one is refused), features converted to
float32 chunk by chunk (:func:`gnnscale.data.npz_stream.read_npz_array`) so a float16 matrix is
never held twice, and the edge list dropped once the CSR is built, before the features are read.
Heterogeneous binary datasets (``raw/edge_index_dict.npz``, ogbn-mag) and several graphs in one
file are refused.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from gnnscale.data.background import BackgroundRead, overlap_fits
from gnnscale.data.node_labels import class_ids
from gnnscale.data.npz import npz_keys
from gnnscale.data.npz_stream import npz_array_header, read_npz_array
from gnnscale.data.ogb_common import (assemble, check_split, edges_to_csr, held_while_building,
                                      is_binary_layout, read_split)
from gnnscale.errors import DataError

REQUIRED_KEYS = ("edge_index", "num_nodes_list", "num_edges_list")


def is_ogb_binary(folder) -> bool:
    """Whether ``folder`` looks like a binary OGB folder (``raw/data.npz`` or the heterogeneous
    ``raw/edge_index_dict.npz``, plus ``split/``)."""
    return is_binary_layout(folder) and (Path(folder) / "split").is_dir()


def load_ogb_binary(path, *, split: int = 0, scheme: str | None = None, symmetrize: bool = True,
                    num_classes: int | None = None, name: str | None = None):
    """Load a binary OGB node-property folder (the one holding ``raw/data.npz`` and ``split/``).

    Options as for :func:`gnnscale.data.ogb.load_ogb`: ``scheme`` picks a split folder when
    there are several, ``split`` must be 0, ``symmetrize`` adds reverse edges (default),
    ``num_classes`` overrides ``max label + 1``, ``name`` defaults to the folder name.
    """
    folder = Path(path)
    raw = folder / "raw"
    data_file = raw / "data.npz"
    if not data_file.is_file():
        if (raw / "edge_index_dict.npz").is_file():
            raise DataError(f"OGB folder {folder} is a heterogeneous graph (raw/"
                            "edge_index_dict.npz, e.g. ogbn-mag); only homogeneous node-property "
                            "datasets are supported")
        raise DataError(f"OGB folder {folder} has no raw/data.npz")
    check_split(split)
    split_ids = read_split(folder, scheme)
    keys = npz_keys(data_file)
    if keys is None:
        raise DataError(f"{data_file} is not a readable .npz (zip) file")
    missing = [k for k in REQUIRED_KEYS if k not in keys]
    if missing:
        raise DataError(f"{data_file} lacks {', '.join(missing)} needed by the OGB binary layout "
                        f"(it has: {', '.join(keys) or 'nothing'})")
    num_nodes = _single(data_file, "num_nodes_list")
    num_edges = _single(data_file, "num_edges_list")

    label_file = raw / "node-label.npz"
    if not label_file.is_file():
        raise DataError(f"OGB folder {folder} has no raw/node-label.npz (node labels)")
    y = class_ids(read_npz_array(label_file, "node_label"), num_nodes, f"{label_file} node_label")

    shape, dtype = npz_array_header(data_file, "edge_index")
    if len(shape) != 2 or shape[0] != 2 or dtype.kind not in "iu":
        raise DataError(f"{data_file}: edge_index must be an integer [2, E] array, got "
                        f"{dtype} {list(shape)}")
    if shape[1] != num_edges:
        raise DataError(f"{data_file}: edge_index has {shape[1]} edges but num_edges_list says "
                        f"{num_edges}")
    feature_key = None
    if "node_feat" in keys:
        shape, dtype = npz_array_header(data_file, "node_feat")
        if len(shape) != 2 or dtype.kind not in "iuf" or shape[0] != num_nodes:
            raise DataError(f"{data_file}: node_feat must be a numeric [N={num_nodes}, F] array, "
                            f"got {dtype} {list(shape)}")
        feature_key = "node_feat"
    # node_feat (the largest member) inflates in a background thread while the edges load
    # and become a CSR, when all of it fits at once (see gnnscale.data.background).
    overlap = feature_key is not None and overlap_fits(
        num_nodes * shape[1] * 4
        + held_while_building(num_edges, num_nodes, symmetrize))
    with BackgroundRead(read_npz_array, data_file if feature_key else None, feature_key,
                        np.float32, overlap=overlap) as feature_job:
        edges = read_npz_array(data_file, "edge_index", np.int64)  # rows: sources, destinations
        indptr, indices = edges_to_csr(edges[0], edges[1], num_nodes, symmetrize,
                                       f"{data_file} edge_index")
        del edges
        features = feature_job.result()
    return assemble(folder, indptr, indices, features, y, split_ids, name=name,
                    num_classes=num_classes, feature_source=f"{data_file} node_feat")


def _single(path: Path, key: str) -> int:
    """The one count in array ``key`` (``ogb`` stores one entry per graph)."""
    shape, dtype = npz_array_header(path, key)
    if math.prod(shape) != 1 or dtype.kind not in "iu":
        raise DataError(f"{path}: {key} must hold one integer (a single graph), got "
                        f"{dtype} {list(shape)}")
    values = read_npz_array(path, key)
    if int(values.ravel()[0]) < 0:
        raise DataError(f"{path}: {key} holds a negative count {int(values.ravel()[0])}")
    return int(values.ravel()[0])
