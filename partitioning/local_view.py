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

from .mapped_rows import read_rows, take_rows


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


# Edges touched per block by the whole-graph passes (degrees, self loops): bounds temporaries.
EDGES_PER_BLOCK = 1 << 24


def row_blocks(indptr, edges_per_block: int = EDGES_PER_BLOCK):
    """Yield row ranges ``(a, b)`` of a CSR holding about ``edges_per_block`` edges each."""
    n = len(indptr) - 1
    a = 0
    while a < n:
        target = int(indptr[a]) + edges_per_block
        b = int(np.searchsorted(indptr, target, side="right")) - 1
        b = min(max(b, a + 1), n)
        yield a, b
        a = b


def out_degree_and_self_loops(indptr, indices, num_nodes: int):
    """int64 ``[N]`` out-degrees and self-loop counts, one bounded pass over the edges."""
    out_degree = np.zeros(num_nodes, dtype=np.int64)
    self_loops = np.zeros(num_nodes, dtype=np.int64)
    for a, b in row_blocks(indptr):
        lo, hi = int(indptr[a]), int(indptr[b])
        src = read_rows(indices, lo, hi)
        out_degree += np.bincount(src, minlength=num_nodes)
        dst = np.repeat(np.arange(a, b, dtype=np.int64), np.diff(indptr[a:b + 1]))
        loops = dst[src == dst]
        if loops.size:
            self_loops += np.bincount(loops, minlength=num_nodes)
    return out_degree, self_loops


class PartViewBuilder:
    """Builds each part's :class:`PartView` from its own rows, in memory bounded by one part.

    graph: anything with ``indptr``, ``indices`` (CSR by destination) and ``num_nodes``; the
        arrays may be memory-mapped (only the rows of the part being built are read).
    node_parts: int array ``[num_nodes]``, the owner part of every node.
    out_degree, self_loops: int64 ``[num_nodes]`` if known (a converted graph stores them);
        else computed in one pass over the edges.

    A part's halo needs only its own rows; its send lists are the other parts' requests of its
    rows. :meth:`view` without ``requests`` takes them from :meth:`halos` (every part's halo,
    one pass over all edges, kept for later views); a distributed caller that knows them from an
    exchange passes them instead (``LocalProblem.from_graph_data`` does).
    """

    def __init__(self, graph, node_parts: np.ndarray, num_parts: int | None = None, *,
                 out_degree=None, self_loops=None):
        self.indptr = np.asarray(graph.indptr)
        self.indices = graph.indices if hasattr(graph.indices, "shape") \
            else np.asarray(graph.indices)
        self.num_nodes = int(graph.num_nodes)
        self.node_parts = np.asarray(node_parts)
        if self.node_parts.shape != (self.num_nodes,):
            raise ValueError(f"node_parts has shape {self.node_parts.shape}, expected "
                             f"({self.num_nodes},)")
        self.num_parts = int(num_parts if num_parts is not None
                             else (self.node_parts.max() + 1 if self.num_nodes else 1))
        self.in_degree = np.diff(self.indptr).astype(np.int64, copy=False)
        if out_degree is None or self_loops is None:
            out_degree, self_loops = out_degree_and_self_loops(self.indptr, self.indices,
                                                               self.num_nodes)
        self.out_degree = np.asarray(out_degree, dtype=np.int64)
        self.self_loops = np.asarray(self_loops, dtype=np.int64)
        self.nodes_by_part = np.argsort(self.node_parts, kind="stable")
        self.owned_starts = np.searchsorted(self.node_parts[self.nodes_by_part],
                                            np.arange(self.num_parts + 1))
        self._lookup = None
        self._seen = None
        self._halos = None
        self.cut_edges = None  # int64 [P]: in-edges of each part from other parts (by halos())

        self.buckets = None

    @classmethod
    def for_graph(cls, graph, node_parts, num_parts=None, spill_dir=None) -> "PartViewBuilder":
        """A builder that reuses the per-node statistics a graph carries (``node_stats``:
        ``out_degree`` and ``self_loops``, as converted graphs store them).

        With ``spill_dir``, a memory-mapped graph of several parts is first grouped by part in
        one sequential pass (:meth:`spill`): building every part then reads the file front to
        back instead of seeking all over it once per part. Call :meth:`close` when done.
        """
        stats = getattr(graph, "node_stats", None) or {}
        builder = cls(graph, node_parts, num_parts, out_degree=stats.get("out_degree"),
                      self_loops=stats.get("self_loops"))
        if spill_dir is not None and isinstance(builder.indices, np.memmap) \
                and builder.num_parts > 1:
            builder.spill(spill_dir)
        return builder

    def spill(self, folder) -> None:
        """Group every part's sources into its own scratch file under ``folder`` (one pass)."""
        from .part_buckets import PartBuckets

        self.buckets = PartBuckets(self.indptr, self.indices, self.node_parts, self.num_parts,
                                   folder, row_blocks(self.indptr))

    def spill_rows(self, name: str, array) -> None:
        """Also group a memory-mapped node array (features) by part, if spilling."""
        if self.buckets is not None and isinstance(array, np.memmap):
            self.buckets.add_rows(name, array)

    def node_rows(self, name: str, array, part: int, owned: np.ndarray) -> np.ndarray:
        """``array[owned]`` of ``part``, from the spill files when the array was spilled."""
        if self.buckets is not None and self.buckets.has(name):
            return self.buckets.rows(name, part)
        return np.asarray(array[owned])

    def close(self) -> None:
        """Remove the spill files (if any)."""
        if self.buckets is not None:
            self.buckets.close()
            self.buckets = None

    def owned(self, part: int) -> np.ndarray:
        """Sorted int64 global ids of the nodes ``part`` owns."""
        if not 0 <= part < self.num_parts:
            raise ValueError(f"part {part} out of range [0, {self.num_parts})")
        return self.nodes_by_part[self.owned_starts[part]:self.owned_starts[part + 1]] \
            .astype(np.int64)

    def rows(self, part: int) -> tuple[np.ndarray, np.ndarray]:
        """``(owned, sources)``: the part's nodes and the global sources of their in-edges in
        CSR order (row by row, as the graph lists them)."""
        owned = self.owned(part)
        if self.buckets is not None:
            return owned, self.buckets.sources(part)
        lengths = self.in_degree[owned]
        total = int(lengths.sum())
        starts = self.indptr[owned]
        if owned.size and int(owned[-1]) - int(owned[0]) + 1 == owned.size:
            # contiguous ids (block partitions, single part): one slice, no index array
            lo = int(starts[0])
            return owned, read_rows(self.indices, lo, lo + total, dtype=np.int64)
        offsets = np.cumsum(lengths) - lengths
        positions = np.repeat(starts - offsets, lengths) + np.arange(total, dtype=np.int64)
        return owned, take_rows(self.indices, positions).astype(np.int64, copy=False)

    def halo(self, part: int, sources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(halo, halo_owner)``: distinct foreign ``sources`` ordered by (owner, global id)."""
        # distinct ids through a bitmap over the nodes: linear, unlike np.unique's sort/hash
        if self._seen is None:
            self._seen = np.zeros(self.num_nodes, dtype=bool)
        self._seen[sources[self.node_parts[sources] != part]] = True
        foreign = np.flatnonzero(self._seen)
        self._seen[foreign] = False
        owner = self.node_parts[foreign]
        order = np.argsort(owner, kind="stable")  # ids ascending within an owner
        return foreign[order], owner[order].astype(np.int32)

    def halos(self) -> list:
        """Every part's ``(halo, halo_owner)``, computed once (one pass over all edges)."""
        if self._halos is None:
            halos, cut = [], np.zeros(self.num_parts, dtype=np.int64)
            for part in range(self.num_parts):
                _, sources = self.rows(part)
                cut[part] = int(np.count_nonzero(self.node_parts[sources] != part))
                halos.append(self.halo(part, sources))
            self._halos, self.cut_edges = halos, cut
        return self._halos

    def requests_of(self, part: int) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, counts)``: the owned ids of ``part`` every other part needs, grouped by the
        receiving part (ascending), ids ascending within a group."""
        ids, counts = [], np.zeros(self.num_parts, dtype=np.int64)
        for receiver, (halo, owner) in enumerate(self.halos()):
            lo, hi = np.searchsorted(owner, [part, part + 1])
            ids.append(halo[lo:hi])
            counts[receiver] = hi - lo
        return np.concatenate(ids) if ids else np.zeros(0, np.int64), counts

    def view(self, part: int, requests=None, rows=None) -> PartView:
        """Build the :class:`PartView` of ``part``.

        requests: ``(ids, counts)`` as :meth:`requests_of` returns them; computed from every
            part's halo when ``None``.
        rows: ``(owned, sources)`` as :meth:`rows` returns them, if already read.
        """
        owned, sources = rows if rows is not None else self.rows(part)
        halo, halo_owner = self.halo(part, sources)
        if requests is None:
            requests = self.requests_of(part)
        request_ids, send_counts = requests
        local_nodes = np.concatenate([owned, halo])
        if self._lookup is None:
            self._lookup = np.full(self.num_nodes, -1, dtype=np.int64)
        lookup = self._lookup
        lookup[local_nodes] = np.arange(local_nodes.size, dtype=np.int64)
        try:
            local_indices = lookup[sources]
            send_index = lookup[np.asarray(request_ids, dtype=np.int64)]
        finally:
            lookup[local_nodes] = -1
        if send_index.size and (send_index.min() < 0 or send_index.max() >= owned.size):
            raise ValueError(f"part {part} was asked for rows it does not own")
        indptr = np.zeros(owned.size + 1, dtype=np.int64)
        np.cumsum(self.in_degree[owned], out=indptr[1:])
        recv_counts = np.bincount(halo_owner, minlength=self.num_parts)
        return PartView(
            part=part, num_parts=self.num_parts, num_global_nodes=self.num_nodes,
            owned_nodes=owned, halo_nodes=halo, halo_owner=halo_owner,
            indptr=indptr, indices=local_indices,
            send_counts=np.asarray(send_counts, dtype=np.int64), send_index=send_index,
            recv_counts=recv_counts.astype(np.int64),
            in_degree=self.in_degree[local_nodes], out_degree=self.out_degree[local_nodes],
            self_loops=self.self_loops[local_nodes])


def build_part_view(graph, node_parts: np.ndarray, part: int,
                    num_parts: int | None = None) -> PartView:
    """The :class:`PartView` of one part (convenience over :class:`PartViewBuilder`)."""
    return PartViewBuilder(graph, node_parts, num_parts).view(part)
