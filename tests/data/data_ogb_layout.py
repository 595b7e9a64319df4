"""Test helper: write a graph as an OGB node-property folder (the ``ogb`` package's layout)."""

import gzip

import numpy as np


def write_csv_gz(path, rows, fmt):
    """Write ``rows`` (scalars or sequences) as header-less gzip CSV, ``fmt`` per value."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as handle:
        for row in rows:
            handle.write(",".join(fmt % v for v in np.atleast_1d(row)) + "\n")


def write_ogb(folder, graph, schemes=("time",), labels=None):
    """Write ``graph`` as ogbn-style folder: directed edges listed once, labels, features."""
    src, dst = graph.edge_index()
    once = src < dst
    write_csv_gz(folder / "raw" / "edge.csv.gz", np.stack([src[once], dst[once]], 1), "%d")
    write_csv_gz(folder / "raw" / "num-node-list.csv.gz", [graph.num_nodes], "%d")
    write_csv_gz(folder / "raw" / "num-edge-list.csv.gz", [int(once.sum())], "%d")
    write_csv_gz(folder / "raw" / "node-feat.csv.gz", graph.x, "%.9g")
    write_csv_gz(folder / "raw" / "node-label.csv.gz", graph.y if labels is None else labels, "%s")
    for scheme in schemes:
        for kind, mask in (("train", graph.train_mask), ("valid", graph.val_mask),
                           ("test", graph.test_mask)):
            write_csv_gz(folder / "split" / scheme / f"{kind}.csv.gz", np.flatnonzero(mask), "%d")
    (folder / "RELEASE_v1.txt").write_text("ogb test folder\n")
    return folder


def write_ogb_binary(folder, graph, labels=None, feat_dtype=np.float32, split="time"):
    """Write ``graph`` in ``ogb``'s binary layout (``papers100M-bin``), as ``ogb.io`` saves it.

    ``raw/data.npz`` (``np.savez_compressed``: ``edge_index`` int64 [2, E] with each undirected
    edge once, ``node_feat``, ``node_year`` as papers100M has, ``num_nodes_list`` and
    ``num_edges_list``), ``raw/node-label.npz`` (``node_label`` float64 [N, 1], NaN where
    ``labels`` says so) and ``split/<split>/{train,valid,test}.csv.gz``.
    """
    raw = folder / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    src, dst = graph.edge_index()
    once = src < dst
    edge_index = np.stack([src[once], dst[once]]).astype(np.int64)
    np.savez_compressed(raw / "data.npz", edge_index=edge_index,
                        node_feat=graph.x.astype(feat_dtype),
                        node_year=np.full((graph.num_nodes, 1), 2019, dtype=np.int64),
                        num_nodes_list=np.array([graph.num_nodes], dtype=np.int64),
                        num_edges_list=np.array([edge_index.shape[1]], dtype=np.int64))
    node_label = (graph.y if labels is None else labels).astype(np.float64)[:, None]
    np.savez_compressed(raw / "node-label.npz", node_label=node_label)
    for kind, mask in (("train", graph.train_mask), ("valid", graph.val_mask),
                       ("test", graph.test_mask)):
        write_csv_gz(folder / "split" / split / f"{kind}.csv.gz", np.flatnonzero(mask), "%d")
    (folder / "RELEASE_v1.txt").write_text("ogb test folder\n")
    return folder
