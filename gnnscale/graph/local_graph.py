"""What one rank of an edge cut sees: owned nodes, halo, and normalised adjacency blocks.

Normalisations (:mod:`.edge_weights`) are computed once from *global* degrees carried by the part
view (a halo node's degree is a property of the whole graph, not of this part), then cached per
kind.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from ..comm import Communicator
from .aggregate import aggregate
from .halo import HaloPlan, exchange_halo, post_halo
from .rank_graph import RankGraph
from .sparse import SparseBlock, csr_row_positions
from .staleness import StaleAggregate, StaleHaloExchange
from .tensor_cache import TensorCache


class LocalGraph(RankGraph):
    """One rank's share of an edge-cut graph, built once from a ``partitioning.PartView``."""

    def __init__(self, view, comm: Communicator, dtype: torch.dtype = torch.float32,
                 device="cpu"):
        super().__init__(comm, dtype, device)
        self.view = view
        self.num_owned = view.num_owned
        self.num_halo = view.num_halo
        self.num_local = self.num_owned + self.num_halo
        self.owned_nodes = view.owned_nodes
        self.halo_plan = HaloPlan.from_part_view(view, comm, self.device)
        # what was derived from a rows tensor (and a columns tensor), per kind of entry: the
        # newest ROW_ENTRIES whose tensors live, the tensors themselves not kept alive
        self._row_cache = TensorCache(self.ROW_ENTRIES)

    @property
    def num_edges(self) -> int:
        return int(self.view.indices.shape[0])

    def _destinations(self) -> np.ndarray:
        """The owned destination row of every local edge (CSR order)."""
        return np.repeat(np.arange(self.num_owned, dtype=np.int64), np.diff(self.view.indptr))

    def _weighted(self, kind: str) -> sp.csr_matrix:
        view = self.view
        return self._normalised(self._destinations(), np.asarray(view.indices, dtype=np.int64),
                                kind, view.in_degree, view.self_loops, self.num_owned)

    def blocks(self, kind: str) -> tuple[SparseBlock, SparseBlock]:
        """(inner, boundary) blocks of the ``kind``-normalised adjacency, built once."""
        def build():
            matrix = self._weighted(kind)
            return (SparseBlock(matrix[:, :self.num_owned], self.dtype, self.device),
                    SparseBlock(matrix[:, self.num_owned:], self.dtype, self.device))
        return self._cached_blocks(kind, build)

    def aggregate(self, owned: torch.Tensor, kind: str) -> torch.Tensor:
        """Normalised neighbourhood aggregation of ``owned`` rows [num_owned, F] -> [num_owned, F].

        The aggregate of an input that cannot change (no gradient, the same tensor at the same
        version, e.g. the raw features in evaluation or without input dropout) is computed
        once and reused, halo exchange included.
        """
        policy = self.active_policy()
        slot = policy.next_slot() if policy is not None else None  # counts cache hits too
        hit = self._constant_hit(owned, kind)
        if hit is not None:
            return hit
        inner, boundary = self.blocks(kind)
        if policy is not None:
            # Not cached: a stale result must not be served to evaluation.
            return StaleAggregate.apply(owned, inner, boundary, self.halo_plan, policy, slot)
        out = aggregate(owned, inner, boundary, self.halo_plan)
        return self._remember_constant(owned, kind, out)

    def aggregate_rows(self, owned: torch.Tensor, kind: str, rows: torch.Tensor,
                       columns: torch.Tensor | None = None) -> torch.Tensor:
        """Rows ``rows`` of :meth:`aggregate`, computed alone: the blocks' rows ``rows``
        (built once per kind and rows tensor) times ``[owned; halo]``, the halo exchanged as
        for every row. Training's last layer needs only the loss's rows, so its product
        and its transposed product backward read only their edges. An input of every owned
        row that needs no gradient (its full aggregate may be kept) or a staleness policy at
        work takes every row and selects. ``columns`` as for
        :meth:`RankGraph.aggregate_rows` (from :meth:`rows_read_by`)."""
        policy = self.active_policy()
        if columns is None and (not owned.requires_grad or policy is not None):
            return super().aggregate_rows(owned, kind, rows)
        inner, boundary = self._row_blocks(kind, rows, columns)
        send_index = None
        if columns is not None and self.halo_plan.exchanges_anything:
            send_index = self._send_positions(columns)
        if policy is not None:  # the input holds only the rows read: the policy's halo
            return StaleAggregate.apply(owned, inner, boundary, self.halo_plan, policy,
                                        policy.next_slot(), send_index)
        return aggregate(owned, inner, boundary, self.halo_plan, send_index)

    def _send_positions(self, columns: torch.Tensor) -> torch.Tensor:
        """:meth:`HaloPlan.send_positions` in ``columns``, kept per columns tensor."""
        return self._kept(("send",), columns, None,
                          lambda: self.halo_plan.send_positions(columns))

    def rows_read_by(self, rows: torch.Tensor) -> torch.Tensor | None:
        """``rows``, their owned in-neighbours and every row sent to a peer's halo (peers'
        rows read those, fresh or stale; sorted, kept per rows tensor); None where that is
        every owned row."""
        def build():
            chosen = rows.cpu().numpy()
            read = np.zeros(self.num_owned, dtype=bool)
            read[chosen] = True
            positions = csr_row_positions(self.view.indptr, chosen)[1]
            sources = np.asarray(self.view.indices)[positions]
            read[sources[sources < self.num_owned]] = True  # local columns: owned, then halo
            read[self.halo_plan.send_index.cpu().numpy()] = True
            return (None if read.all()
                    else torch.from_numpy(np.flatnonzero(read)).to(self.device))
        return self._kept(("read_by",), rows, None, build)

    def positions_in(self, rows: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
        """As :meth:`RankGraph.positions_in`, kept per rows and columns tensor."""
        return self._kept(("positions",), rows, columns,
                          lambda: super(LocalGraph, self).positions_in(rows, columns))

    def _row_blocks(self, kind: str, rows: torch.Tensor,
                    columns: torch.Tensor | None = None) -> tuple[SparseBlock, SparseBlock]:
        """(inner, boundary) blocks of rows ``rows`` of the ``kind``-normalised adjacency
        (the inner block's columns renumbered to ``columns``, where given), kept per rows and
        columns tensor (the trainer passes the same ones each step)."""
        def build():
            chosen = rows.cpu().numpy()
            inner, boundary = self.blocks(kind)
            return (inner.take_rows(chosen, None if columns is None
                                    else columns.cpu().numpy()),
                    boundary.take_rows(chosen))
        return self._kept(("rows", kind), rows, columns, build)

    #: row-subset entries kept per kind of entry (the loss's rows, and the rows each earlier
    #: layer computes for them)
    ROW_ENTRIES = 4

    def _kept(self, key: tuple, rows: torch.Tensor, columns: torch.Tensor | None, build):
        """``build()``'s value for these very tensors at their versions: the one kept under
        ``key`` if there is one, else built now and kept (the newest :data:`ROW_ENTRIES` per
        key whose tensors live; the tensors themselves are not kept alive)."""
        return self._row_cache.get_or_build(key, (rows, columns), build)

    def gather_with_halo(self, owned: torch.Tensor) -> torch.Tensor:
        """``[owned; halo]`` rows (differentiable), for layers that need source features."""
        policy = self.active_policy()
        if policy is not None:
            halo = StaleHaloExchange.apply(owned, self.halo_plan, policy, policy.next_slot())
            return torch.cat([owned, halo], dim=0)
        return exchange_halo(owned, self.halo_plan)

    def halo_async(self, owned: torch.Tensor):
        """Post the halo exchange of ``owned`` now; returns ``finish()`` giving the halo rows
        [num_halo, F] (differentiable), so the caller can compute in between. None where
        there is nothing to overlap (one rank, or a staleness policy fetching the halo):
        use :meth:`gather_with_halo` then."""
        if self.active_policy() is not None or not self.halo_plan.exchanges_anything:
            return None
        return post_halo(owned, self.halo_plan)

    def local_edge_index(self) -> torch.Tensor:
        """(2, E) local edge index, row 0 = source column, row 1 = owned destination row."""
        src = np.asarray(self.view.indices, np.int64)
        return torch.from_numpy(np.stack([src, self._destinations()])).to(self.device)

    def __repr__(self) -> str:
        return (f"LocalGraph(rank={self.comm.rank}, owned={self.num_owned}, "
                f"halo={self.num_halo}, edges={self.num_edges})")
