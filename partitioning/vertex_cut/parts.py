"""What one part of a vertex cut holds: its masters, its mirrors and a local CSR of its edges.

Every edge belongs to one part and every node has one master part. Part ``p`` holds

- ``owned_nodes``: its masters, ascending global ids;
- ``mirror_nodes``: nodes that are endpoints of its edges but mastered elsewhere, ordered by
  (master part, id), and ``mirror_owner`` (int32), their master parts;
- ``indptr``, ``indices``: a CSR by destination over local nodes (masters then mirrors) of the
  part's edges, sources as local ids;
- ``edge_ids``: the global id (CSR position) of each of those edges, in the local CSR's order.

The same arrays feed training in memory (every rank builds its own part) and the partition store
(one file set per part), so both see the same parts.
"""

from __future__ import annotations

import numpy as np

from ..csr_ops import csr_destinations


def _part_arrays(indices: np.ndarray, dst: np.ndarray, node_parts: np.ndarray,
                 edge_ids: np.ndarray, part: int, lookup: np.ndarray) -> dict:
    """The arrays of ``part`` from its ascending ``edge_ids`` and their destinations ``dst``.

    ``lookup`` is an all ``-1`` int64 scratch array of one entry per node, left as it was found.
    """
    src = indices[edge_ids]
    owned = np.flatnonzero(node_parts == part).astype(np.int64)
    present = np.unique(np.concatenate([src, dst]))
    mirrors = present[node_parts[present] != part]
    owner = node_parts[mirrors]
    order = np.lexsort((mirrors, owner))
    mirrors, owner = mirrors[order], owner[order]
    local = np.concatenate([owned, mirrors])
    lookup[local] = np.arange(local.size)
    rows = lookup[dst]
    by_row = np.argsort(rows, kind="stable")
    local_indptr = np.zeros(local.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=local.size), out=local_indptr[1:])
    local_indices = lookup[src][by_row]
    lookup[local] = -1
    return {"owned_nodes": owned, "mirror_nodes": mirrors.astype(np.int64),
            "mirror_owner": owner.astype(np.int32), "indptr": local_indptr,
            "indices": local_indices, "edge_ids": edge_ids[by_row].astype(np.int64)}


def _as_arrays(graph, node_parts, edge_parts):
    indptr = np.asarray(graph.indptr, np.int64)
    indices = np.asarray(graph.indices, np.int64)
    node_parts, edge_parts = np.asarray(node_parts), np.asarray(edge_parts)
    num_nodes = indptr.shape[0] - 1
    if node_parts.shape != (num_nodes,) or edge_parts.shape != indices.shape:
        raise ValueError(f"a vertex cut of a graph with {num_nodes} nodes and {indices.size} "
                         f"edges needs node_parts of shape ({num_nodes},) and edge_parts of "
                         f"shape ({indices.size},); got {node_parts.shape} and "
                         f"{edge_parts.shape}")
    return indptr, indices, node_parts, edge_parts


class VertexCutPartBuilder:
    """Groups a vertex cut's edges by part once, so each part then costs only its own edges.

    graph: anything with ``indptr`` and ``indices`` (CSR by destination).
    node_parts: int ``[N]``, the master part of every node; edge_parts: int ``[E]``, the part of
    every edge (CSR order); num_parts: the number of parts.
    """

    def __init__(self, graph, node_parts, edge_parts, num_parts: int):
        indptr, self.indices, self.node_parts, edge_parts = _as_arrays(graph, node_parts,
                                                                       edge_parts)
        self.num_parts = int(num_parts)
        self.dst = csr_destinations(indptr, self.indices.shape[0])
        self.edge_order = np.argsort(edge_parts, kind="stable")  # ascending inside a part
        self.starts = np.searchsorted(edge_parts[self.edge_order], np.arange(self.num_parts + 1))
        self._lookup = np.full(indptr.shape[0] - 1, -1, dtype=np.int64)

    def part(self, part: int) -> dict:
        """The arrays of ``part`` (see the module docstring)."""
        if not 0 <= part < self.num_parts:
            raise ValueError(f"part {part} out of range [0, {self.num_parts})")
        edge_ids = self.edge_order[self.starts[part]:self.starts[part + 1]]
        return _part_arrays(self.indices, self.dst[edge_ids], self.node_parts, edge_ids, part,
                            self._lookup)


def vertex_cut_part(graph, node_parts, edge_parts, part: int) -> dict:
    """The arrays of one part (see the module docstring), touching only that part's edges
    beyond one pass over ``edge_parts``: for a rank that builds its own part in memory."""
    indptr, indices, node_parts, edge_parts = _as_arrays(graph, node_parts, edge_parts)
    edge_ids = np.flatnonzero(edge_parts == part)
    dst = np.searchsorted(indptr, edge_ids, side="right") - 1
    lookup = np.full(indptr.shape[0] - 1, -1, dtype=np.int64)
    return _part_arrays(indices, dst, node_parts, edge_ids, part, lookup)
