"""What one rank sees of the graph: owned nodes, halo, and normalised adjacency blocks.

Normalisations are computed once from *global* degrees carried by the part view (a halo node's
degree is a property of the whole graph, not of this part), then cached per kind:

- ``"gcn"``: ``D^-1/2 (A + I) D^-1/2`` with existing self-loops replaced by one unit loop per
  node, ``D`` the in-degree counting that loop (as PyG's ``gcn_norm``).
- ``"mean"``: ``1/in_degree(v)`` on every in-edge of ``v`` (isolated nodes aggregate to zero).
- ``"sum"``: unit weights.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from ..comm import Communicator
from .aggregate import aggregate
from .halo import HaloPlan, exchange_halo
from .sparse import SparseBlock
from .staleness import StaleAggregate, StaleHaloExchange

NORMALISATIONS = ("gcn", "mean", "sum")


class LocalGraph:
    """One rank's share of the graph, built once from a ``partitioning.PartView``."""

    def __init__(self, view, comm: Communicator, dtype: torch.dtype = torch.float32,
                 device="cpu"):
        self.view = view
        self.comm = comm
        self.dtype = dtype
        self.device = torch.device(device)
        self.num_owned = view.num_owned
        self.num_halo = view.num_halo
        self.num_local = self.num_owned + self.num_halo
        self.owned_nodes = view.owned_nodes
        self.halo_plan = HaloPlan.from_part_view(view, comm, self.device)
        self._blocks: dict = {}
        self._constant_cache: dict = {}  # kind -> (input tensor, its version, aggregate)
        self.staleness = None  # a staleness.StalenessPolicy; None = exact (see staleness.py)

    @property
    def num_edges(self) -> int:
        return int(self.view.indices.shape[0])

    def _weighted(self, kind: str) -> sp.csr_matrix:
        view = self.view
        rows = np.repeat(np.arange(self.num_owned, dtype=np.int64), np.diff(view.indptr))
        cols = np.asarray(view.indices, dtype=np.int64)
        if kind == "sum":
            weights = np.ones(cols.shape[0], dtype=np.float64)
        elif kind == "mean":
            deg = np.diff(view.indptr).astype(np.float64)
            weights = 1.0 / deg[rows]
        elif kind == "gcn":
            keep = rows != cols  # local row i is local column i for owned nodes
            rows = np.concatenate([rows[keep], np.arange(self.num_owned)])
            cols = np.concatenate([cols[keep], np.arange(self.num_owned)])
            deg = (view.in_degree - view.self_loops + 1).astype(np.float64)
            inv_sqrt = 1.0 / np.sqrt(deg)
            weights = inv_sqrt[rows] * inv_sqrt[cols]
        else:
            raise ValueError(f"unknown normalisation {kind!r}; choose one of "
                             f"{', '.join(NORMALISATIONS)}")
        return sp.csr_matrix((weights, (rows, cols)), shape=(self.num_owned, self.num_local))

    def blocks(self, kind: str) -> tuple[SparseBlock, SparseBlock]:
        """(inner, boundary) blocks of the ``kind``-normalised adjacency, built once."""
        if kind not in self._blocks:
            matrix = self._weighted(kind)
            inner = SparseBlock(matrix[:, :self.num_owned], self.dtype, self.device)
            boundary = SparseBlock(matrix[:, self.num_owned:], self.dtype, self.device)
            self._blocks[kind] = (inner, boundary)
        return self._blocks[kind]

    def aggregate(self, owned: torch.Tensor, kind: str) -> torch.Tensor:
        """Normalised neighbourhood aggregation of ``owned`` rows [num_owned, F] -> [num_owned, F].

        The aggregate of an input that cannot change (no gradient, the same tensor at the same
        version, e.g. the raw features in evaluation or without input dropout) is computed
        once and reused, halo exchange included.
        """
        policy = self._active_policy()
        slot = policy.next_slot() if policy is not None else None  # counts cache hits too
        constant = not owned.requires_grad
        if constant:
            hit = self._constant_cache.get(kind)
            if hit is not None and hit[0] is owned and hit[1] == owned._version:
                return hit[2]
        inner, boundary = self.blocks(kind)
        if policy is not None:
            # Not cached: a stale result must not be served to evaluation.
            return StaleAggregate.apply(owned, inner, boundary, self.halo_plan, policy, slot)
        out = aggregate(owned, inner, boundary, self.halo_plan)
        if constant:
            self._constant_cache[kind] = (owned, owned._version, out)
        return out

    def gather_with_halo(self, owned: torch.Tensor) -> torch.Tensor:
        """``[owned; halo]`` rows (differentiable), for layers that need source features."""
        policy = self._active_policy()
        if policy is not None:
            halo = StaleHaloExchange.apply(owned, self.halo_plan, policy, policy.next_slot())
            return torch.cat([owned, halo], dim=0)
        return exchange_halo(owned, self.halo_plan)

    def halo_async(self, owned: torch.Tensor):
        """Post the halo exchange of ``owned`` now; returns ``finish()`` giving the halo rows
        [num_halo, F] (differentiable), so the caller can compute in between. None where
        there is nothing to overlap (one rank, or a staleness policy fetching the halo):
        use :meth:`gather_with_halo` then."""
        if self._active_policy() is not None or not self.halo_plan.exchanges_anything:
            return None
        from .halo import HaloWait

        plan = self.halo_plan
        work = plan.post_forward(owned)
        if not plan.overlap:  # measuring: wait at once, all of the exchange exposed
            halo = HaloWait.apply(owned, plan, work)
            return lambda: halo
        return lambda: HaloWait.apply(owned, plan, work)

    def _active_policy(self):
        """The staleness policy inside a training step with peers, else None (exact)."""
        policy = self.staleness
        if policy is None or not policy.active or not self.halo_plan.exchanges_anything:
            return None
        return policy

    def local_edge_index(self) -> torch.Tensor:
        """(2, E) local edge index, row 0 = source column, row 1 = owned destination row."""
        view = self.view
        dst = np.repeat(np.arange(self.num_owned, dtype=np.int64), np.diff(view.indptr))
        return torch.from_numpy(np.stack([np.asarray(view.indices, np.int64), dst])).to(self.device)

    def __repr__(self) -> str:
        return (f"LocalGraph(rank={self.comm.rank}, owned={self.num_owned}, "
                f"halo={self.num_halo}, edges={self.num_edges})")
