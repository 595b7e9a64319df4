"""Per-part array sets written by :mod:`partitioning.store` (one generator per partition kind)."""

from __future__ import annotations

import numpy as np

from .base import Partition
from .local_view import PartViewBuilder


def _node_data(rows: np.ndarray, x, y, masks, x_rows: np.ndarray | None = None) -> dict:
    arrays = {}
    if x is not None:
        arrays["x"] = np.ascontiguousarray(x[rows if x_rows is None else x_rows])
    if y is not None:
        arrays["y"] = np.ascontiguousarray(y[rows])
    for name, mask in masks.items():
        arrays[f"mask_{name}"] = mask[rows]
    return arrays


def edge_cut_part_arrays(graph, partition: Partition, x, y, masks, builder=None):
    """Yield ``(part, arrays)``: the :class:`PartView` fields plus owned rows of x, y, masks.

    One part at a time from the part's own rows (``graph`` and ``x`` may be memory-mapped), so
    the memory is bounded by the largest part plus every part's halo ids.
    """
    if builder is None:
        builder = PartViewBuilder(graph, partition.node_parts, partition.num_parts)
    for part in range(partition.num_parts):
        view = builder.view(part)
        arrays = view.arrays()
        arrays.update(_node_data(view.owned_nodes, x, y, masks))
        yield part, arrays


def vertex_cut_part_arrays(graph, partition: Partition, x, y, masks):
    """Yield ``(part, arrays)`` of a vertex cut: local nodes, local CSR of the part's edges."""
    n = graph.num_nodes
    dst_all = np.repeat(np.arange(n, dtype=np.int64), graph.in_degree())
    edge_order = np.argsort(partition.edge_parts, kind="stable")
    starts = np.searchsorted(partition.edge_parts[edge_order],
                             np.arange(partition.num_parts + 1))
    in_degree, out_degree = graph.in_degree(), graph.out_degree()
    lookup = np.full(n, -1, dtype=np.int64)
    for part in range(partition.num_parts):
        edge_ids = edge_order[starts[part]:starts[part + 1]]  # ascending: CSR order kept
        src, dst = graph.indices[edge_ids], dst_all[edge_ids]
        owned = partition.nodes_of_part(part)
        present = np.unique(np.concatenate([src, dst]))
        mirrors = present[partition.node_parts[present] != part]
        mirror_owner = partition.node_parts[mirrors]
        order = np.lexsort((mirrors, mirror_owner))
        mirrors, mirror_owner = mirrors[order], mirror_owner[order]
        local = np.concatenate([owned, mirrors])
        lookup[local] = np.arange(local.size)
        rows = lookup[dst]
        by_row = np.argsort(rows, kind="stable")
        indptr = np.zeros(local.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=local.size), out=indptr[1:])
        arrays = {
            "owned_nodes": owned, "mirror_nodes": mirrors,
            "mirror_owner": mirror_owner.astype(np.int32), "indptr": indptr,
            "indices": lookup[src][by_row], "edge_ids": edge_ids[by_row].astype(np.int64),
            "in_degree": in_degree[local], "out_degree": out_degree[local],
        }
        arrays.update(_node_data(owned, x, y, masks, x_rows=local))
        lookup[local] = -1
        yield part, arrays
