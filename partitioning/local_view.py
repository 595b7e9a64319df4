"""What one part of an edge-cut partition holds: its owned nodes, its halo and its exchange lists.

This is the single place that turns ``(graph, node_parts)`` into per-part arrays; the in-memory
path (every rank partitions a small graph itself) and the on-disk partition store both use it.

Local numbering of part ``p``: owned nodes first (ascending global id), then halo nodes ordered
by (owner part, global id). Halo rows from part ``q`` are therefore one contiguous block, which
is exactly the layout an ``alltoallv`` receive buffer has. Part ``q`` sends to ``p`` its owned
rows in ascending global id, matching that order.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np


@dataclass
class PartView:
    """Arrays one rank needs for its part (all NumPy, int64 unless stated).

    owned_nodes: [n_owned] global ids of the nodes this part owns, ascending.
    halo_nodes: [n_halo] global ids of non-owned sources of owned nodes' in-edges.
    halo_owner: [n_halo] int32 part owning each halo node (non-decreasing).
    indptr, indices: local CSR by destination, rows = owned nodes, columns in [0, n_owned+n_halo).
    send_counts: [num_parts] rows this part sends to each part per exchange.
    send_index: [sum(send_counts)] local row (< n_owned) of each sent row, grouped by receiver.
    recv_counts: [num_parts] halo rows received from each part.
    in_degree: [n_owned+n_halo] global in-degree of every local node (for normalisation).
    out_degree: [n_owned+n_halo] global out-degree of every local node.
    self_loops: [n_owned+n_halo] number of self-loop edges (v->v) at every local node.
    """

    part: int
    num_parts: int
    num_global_nodes: int
    owned_nodes: np.ndarray
    halo_nodes: np.ndarray
    halo_owner: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    send_counts: np.ndarray
    send_index: np.ndarray
    recv_counts: np.ndarray
    in_degree: np.ndarray
    out_degree: np.ndarray
    self_loops: np.ndarray

    @property
    def num_owned(self) -> int:
        return int(self.owned_nodes.shape[0])

    @property
    def num_halo(self) -> int:
        return int(self.halo_nodes.shape[0])

    @property
    def local_nodes(self) -> np.ndarray:
        """Global ids of all local columns: owned then halo."""
        return np.concatenate([self.owned_nodes, self.halo_nodes])

    def arrays(self) -> dict:
        """All array fields by name (for writing to disk)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if isinstance(getattr(self, f.name), np.ndarray)}


class PartViewBuilder:
    """Pre-sorts a graph's edges once so each part's view costs only its own edges.

    graph: anything with ``indptr``, ``indices`` (CSR by destination) and ``num_nodes``.
    node_parts: int array ``[num_nodes]``, the owner part of every node.
    """

    def __init__(self, graph, node_parts: np.ndarray, num_parts: int | None = None):
        indptr = np.asarray(graph.indptr, dtype=np.int64)
        self.indices = np.asarray(graph.indices, dtype=np.int64)
        self.num_nodes = int(graph.num_nodes)
        self.node_parts = np.asarray(node_parts)
        if self.node_parts.shape != (self.num_nodes,):
            raise ValueError(f"node_parts has shape {self.node_parts.shape}, expected "
                             f"({self.num_nodes},)")
        self.num_parts = int(num_parts if num_parts is not None
                             else (self.node_parts.max() + 1 if self.num_nodes else 1))
        self.in_degree = np.diff(indptr)
        self.out_degree = np.bincount(self.indices, minlength=self.num_nodes).astype(np.int64)
        dst = np.repeat(np.arange(self.num_nodes, dtype=np.int64), self.in_degree)
        loops = dst == self.indices
        self.self_loops = np.bincount(dst[loops], minlength=self.num_nodes).astype(np.int64)
        dst_part = self.node_parts[dst]
        src_part = self.node_parts[self.indices]
        # Edges grouped by destination part, CSR order kept inside a part (stable sort).
        self.edge_order = np.argsort(dst_part, kind="stable")
        self.edge_starts = np.searchsorted(dst_part[self.edge_order],
                                           np.arange(self.num_parts + 1))
        # Distinct cross-part (destination part, source) pairs, once for halos and send lists.
        cross = src_part != dst_part
        keys = np.unique(dst_part[cross].astype(np.int64) * self.num_nodes + self.indices[cross])
        self.pair_dst_part = keys // self.num_nodes
        self.pair_src = keys % self.num_nodes
        self.pair_src_part = self.node_parts[self.pair_src]
        # Pairs sorted by (source part, destination part, source): the send side.
        self.send_order = np.lexsort((self.pair_src, self.pair_dst_part, self.pair_src_part))
        self.send_starts = np.searchsorted(self.pair_src_part[self.send_order],
                                           np.arange(self.num_parts + 1))
        self.halo_starts = np.searchsorted(self.pair_dst_part, np.arange(self.num_parts + 1))
        self.nodes_by_part = np.argsort(self.node_parts, kind="stable")
        self.owned_starts = np.searchsorted(self.node_parts[self.nodes_by_part],
                                            np.arange(self.num_parts + 1))

    def view(self, part: int) -> PartView:
        """Build the :class:`PartView` of ``part``."""
        if not 0 <= part < self.num_parts:
            raise ValueError(f"part {part} out of range [0, {self.num_parts})")
        owned = self.nodes_by_part[self.owned_starts[part]:self.owned_starts[part + 1]]
        owned = owned.astype(np.int64)
        # Halo: pairs whose destination part is `part`, ordered by (owner, global id).
        lo, hi = self.halo_starts[part], self.halo_starts[part + 1]
        halo_src = self.pair_src[lo:hi]
        halo_owner_unsorted = self.pair_src_part[lo:hi]
        order = np.lexsort((halo_src, halo_owner_unsorted))
        halo = halo_src[order]
        halo_owner = halo_owner_unsorted[order].astype(np.int32)
        local_nodes = np.concatenate([owned, halo])
        # Global -> local ids for exactly the nodes this part touches.
        lookup = np.full(self.num_nodes, -1, dtype=np.int64)
        lookup[local_nodes] = np.arange(local_nodes.shape[0], dtype=np.int64)
        edges = self.edge_order[self.edge_starts[part]:self.edge_starts[part + 1]]
        local_indices = lookup[self.indices[edges]]
        row_lengths = self.in_degree[owned]
        indptr = np.zeros(owned.shape[0] + 1, dtype=np.int64)
        np.cumsum(row_lengths, out=indptr[1:])
        # Send lists: pairs whose source part is `part`, grouped by receiving part.
        sel = self.send_order[self.send_starts[part]:self.send_starts[part + 1]]
        send_index = lookup[self.pair_src[sel]]
        send_counts = np.bincount(self.pair_dst_part[sel], minlength=self.num_parts)
        recv_counts = np.bincount(halo_owner, minlength=self.num_parts)
        return PartView(
            part=part, num_parts=self.num_parts, num_global_nodes=self.num_nodes,
            owned_nodes=owned, halo_nodes=halo, halo_owner=halo_owner,
            indptr=indptr, indices=local_indices,
            send_counts=send_counts.astype(np.int64), send_index=send_index,
            recv_counts=recv_counts.astype(np.int64),
            in_degree=self.in_degree[local_nodes], out_degree=self.out_degree[local_nodes],
            self_loops=self.self_loops[local_nodes])


def build_part_view(graph, node_parts: np.ndarray, part: int,
                    num_parts: int | None = None) -> PartView:
    """The :class:`PartView` of one part (convenience over :class:`PartViewBuilder`)."""
    return PartViewBuilder(graph, node_parts, num_parts).view(part)
