"""Per-part array sets written by :mod:`partitioning.store` (one generator per partition kind)."""

from __future__ import annotations

import numpy as np

from .base import Partition
from .local_view import PartViewBuilder
from .vertex_cut.parts import VertexCutPartBuilder


def _node_data(rows: np.ndarray, x, y, masks, x_rows: np.ndarray | None = None,
               x_of=None) -> dict:
    arrays = {}
    if x is not None and x_of is not None:
        arrays["x"] = np.ascontiguousarray(x_of(rows))
    elif x is not None:
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
        arrays.update(_node_data(view.owned_nodes, x, y, masks,
                                 x_of=lambda owned: builder.node_rows("x", x, part, owned)))
        yield part, arrays


def vertex_cut_part_arrays(graph, partition: Partition, x, y, masks):
    """Yield ``(part, arrays)`` of a vertex cut: the arrays of
    :mod:`partitioning.vertex_cut.parts` (local nodes, local CSR of the part's edges, their
    global ids), global in- and out-degrees of the local nodes, owned rows of y and the masks,
    and x for every local node (masters then mirrors)."""
    builder = VertexCutPartBuilder(graph, partition.node_parts, partition.edge_parts,
                                   partition.num_parts)
    in_degree, out_degree = graph.in_degree(), graph.out_degree()
    for part in range(partition.num_parts):
        arrays = builder.part(part)
        owned = arrays["owned_nodes"]
        local = np.concatenate([owned, arrays["mirror_nodes"]])
        arrays.update(in_degree=in_degree[local], out_degree=out_degree[local])
        arrays.update(_node_data(owned, x, y, masks, x_rows=local))
        yield part, arrays
