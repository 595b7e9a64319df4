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
