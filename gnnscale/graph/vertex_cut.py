"""Vertex-cut execution (DistGNN's cd-0): each rank aggregates its own *edges*.

A vertex-cut partition gives every edge one part and every node one master part. Rank ``p``
holds its masters ("owned", features, labels, the layers' dense transforms) and mirrors: nodes
that are endpoints of its edges but mastered elsewhere. One aggregation is

1. masters -> mirrors: the replicas get their master's current rows (the "send the result back
   to the replicas" step of DistGNN, done lazily at the next aggregation);
2. every rank multiplies its own edges: complete sums for nothing yet, partial sums for every
   local destination, owned or mirror;
3. mirrors -> masters: partial sums are added into the master's row (the reduce).

Both exchanges go through a :class:`HaloPlan` whose halo is the mirror set (forward = master to
mirrors, reverse = mirrors to master summed), so ``--halo-dtype`` and the staleness policies
apply to them as to edge-cut halos (under ``local`` remote partial sums are dropped: DistGNN 0c).
Backward is the transpose: gradients go master -> mirrors, through the transposed blocks, and
mirror gradients are summed back into masters.

Normalisation uses global degrees, assembled at set-up by the same plan (local in-degree and
self-loop counts reduced to masters, then sent back to mirrors), so edge weights are global and
partial sums just add: ``gcn`` (one unit self loop per node, added at its master), ``mean``
(``1/in_degree(dst)``), ``sum``. Layers that need per-edge source rows (GAT, max aggregation,
wrapped PyG convs) are not supported on a vertex cut.
"""

from __future__ import annotations

import numpy as np
import torch

from ..comm import Communicator
from .halo import HaloPlan
from .rank_graph import RankGraph
from .sparse import SparseBlock
from .staleness import FEATURES, TO_OWNER, ExactPolicy


def _mirror_plan(arrays: dict, comm: Communicator, device) -> HaloPlan:
    """Plan whose halo is the mirror set: owners learn who mirrors what (two alltoallv's)."""
    owned = np.asarray(arrays["owned_nodes"], np.int64)
    mirrors = np.asarray(arrays["mirror_nodes"], np.int64)
    recv_counts = np.bincount(np.asarray(arrays["mirror_owner"], np.int64),
                              minlength=comm.size).astype(np.int64)
    if comm.size == 1:
        send_index, send_counts = np.zeros(0, np.int64), recv_counts
    else:
        counts = torch.from_numpy(recv_counts.reshape(-1, 1).copy())
        send_counts = comm.alltoallv(counts, [1] * comm.size, [1] * comm.size).reshape(-1).numpy()
        requested = comm.alltoallv(torch.from_numpy(mirrors.reshape(-1, 1).copy()),
                                   recv_counts.tolist(), send_counts.tolist()).reshape(-1).numpy()
        send_index = np.searchsorted(owned, requested)
        if requested.size and not np.array_equal(owned[np.minimum(send_index, owned.size - 1)],
                                                 requested):
            raise ValueError(f"rank {comm.rank}: a peer mirrors a node this rank does not own; "
                             f"the parts come from different partitions")
    return HaloPlan(comm=comm, num_owned=int(owned.size), num_halo=int(mirrors.size),
                    send_index=torch.from_numpy(send_index.astype(np.int64)).to(device),
                    send_counts=[int(c) for c in send_counts],
                    recv_counts=[int(c) for c in recv_counts])


class VertexCutAggregate(torch.autograd.Function):
    """Masters -> mirrors, local edges, partial sums -> masters (see the module docstring)."""

    @staticmethod
    def forward(ctx, owned, blocks, plan, policy, slot):
        oo, om, mo, mm = blocks
        ctx.state = (blocks, plan, policy, slot)
        handle = policy.start((slot, "fwd"), plan.sent_rows(owned), plan,
                              reverse=False, kind=FEATURES)
        # the products of the owned rows run while the mirrors' rows travel, the exchange
        # tested between their row blocks (MPI moves data only inside MPI calls)
        progress = policy.progress(handle, plan)
        out = oo.matmul(owned, progress)
        partial = mo.matmul(owned, progress)
        mirror = policy.finish(handle, plan).to(owned.dtype)
        # each second product is added into the first's fresh result in the kernel: no
        # temporary, and the (mostly empty) rows of a block without non-zeros are skipped
        partial = mm.matmul(mirror, add_to=partial)
        handle = policy.start((slot, "sum"), partial, plan, reverse=True, kind=TO_OWNER)
        out = om.matmul(mirror, policy.progress(handle, plan), add_to=out)
        return plan.accumulate_into_owned(out, policy.finish(handle, plan))

    @staticmethod
    def backward(ctx, grad_out):
        (oo, om, mo, mm), plan, policy, slot = ctx.state
        if not ctx.needs_input_grad[0]:
            return None, None, None, None, None
        grad_out = grad_out.contiguous()
        handle = policy.start((slot, "bwd"), plan.sent_rows(grad_out), plan,
                              reverse=False, kind=TO_OWNER)
        # as in forward: the products of the owned rows' gradients run while the mirrors'
        # gradients travel, the mirrors <- masters one while their sums do
        progress = policy.progress(handle, plan)
        grad_owned = oo.matmul_transposed(grad_out, progress)
        grad_mirror = om.matmul_transposed(grad_out, progress)
        grad_mirror_partial = policy.finish(handle, plan).to(grad_out.dtype)
        grad_mirror = mm.matmul_transposed(grad_mirror_partial, add_to=grad_mirror)
        handle = policy.start((slot, "bwd_sum"), grad_mirror, plan, reverse=True, kind=TO_OWNER)
        grad_owned = mo.matmul_transposed(grad_mirror_partial, policy.progress(handle, plan),
                                          add_to=grad_owned)
        sent = policy.finish(handle, plan)
        return plan.accumulate_into_owned(grad_owned, sent), None, None, None, None


class VertexCutGraph(RankGraph):
    """One rank's share of a vertex cut: masters own, mirrors play the halo's part."""

    def __init__(self, arrays: dict, comm: Communicator, dtype: torch.dtype = torch.float32,
                 device="cpu"):
        super().__init__(comm, dtype, device)
        self.owned_nodes = np.asarray(arrays["owned_nodes"], np.int64)
        self.mirror_nodes = np.asarray(arrays["mirror_nodes"], np.int64)
        self.num_owned = int(self.owned_nodes.size)
        self.num_halo = int(self.mirror_nodes.size)  # mirrors play the halo's part
        self.num_local = self.num_owned + self.num_halo
        self.indptr = np.asarray(arrays["indptr"], np.int64)
        self.indices = np.asarray(arrays["indices"], np.int64)
        self.halo_plan = _mirror_plan(arrays, comm, self.device)
        self._exact = ExactPolicy()
        self.in_degree, self.self_loops = self._global_counts()

    @property
    def num_edges(self) -> int:
        return int(self.indices.shape[0])

    @property
    def replication(self) -> float:
        """(owned + mirrors) / owned on this rank."""
        return self.num_local / max(self.num_owned, 1)

    def _rows(self) -> np.ndarray:
        return np.repeat(np.arange(self.num_local, dtype=np.int64), np.diff(self.indptr))

    def _global_counts(self):
        """Global in-degree and self-loop count of every local node (collective)."""
        rows = self._rows()
        local = np.stack([np.bincount(rows, minlength=self.num_local),
                          np.bincount(rows[rows == self.indices], minlength=self.num_local)],
                         axis=1).astype(np.float64)
        counts = torch.from_numpy(local)
        owned, mirror = counts[:self.num_owned].clone(), counts[self.num_owned:]
        plan = self.halo_plan
        if plan.exchanges_anything:
            plan.accumulate_into_owned(owned, self.comm.alltoallv(
                mirror.contiguous(), *plan.counts(reverse=True)))
            mirror = self.comm.alltoallv(plan.sent_rows(owned).contiguous(),
                                         *plan.counts())
        total = torch.cat([owned, mirror]).numpy()
        return total[:, 0].astype(np.int64), total[:, 1].astype(np.int64)

    def blocks(self, kind: str):
        """(owned<-owned, owned<-mirror, mirror<-owned, mirror<-mirror) blocks, built once."""
        def build():
            m = self._normalised(self._rows(), self.indices, kind, self.in_degree,
                                 self.self_loops, self.num_local)
            k = self.num_owned
            return tuple(SparseBlock(block, self.dtype, self.device) for block in
                         (m[:k, :k], m[:k, k:], m[k:, :k], m[k:, k:]))
        return self._cached_blocks(kind, build)

    def aggregate(self, owned: torch.Tensor, kind: str) -> torch.Tensor:
        """Normalised aggregation over every part's edges into this rank's masters."""
        policy = self.active_policy()
        slot = policy.next_slot() if policy is not None else 0
        blocks = self.blocks(kind)
        if not self.halo_plan.exchanges_anything:
            return blocks[0].matmul(owned) if not owned.requires_grad else \
                _OwnedOnly.apply(owned, blocks[0])
        if policy is None:  # a stale result must not be cached
            hit = self._constant_hit(owned, kind)
            if hit is not None:
                return hit
        out = VertexCutAggregate.apply(owned, blocks, self.halo_plan, policy or self._exact, slot)
        if policy is None:
            out = self._remember_constant(owned, kind, out)
        return out

    def gather_with_halo(self, owned):
        """Refused: a vertex cut gives no rank every in-edge of a node (see the module doc)."""
        raise ValueError("this layer needs every edge's source row, which a vertex cut does not "
                         "give; on a vertex cut use gcn, sage (mean/sum) or gin, or partition "
                         "with an edge cut (metis, ldg, fennel, ...)")

    def halo_async(self, owned):
        """Refused, as :meth:`gather_with_halo`."""
        self.gather_with_halo(owned)

    def local_edge_index(self):
        """Refused, as :meth:`gather_with_halo`."""
        self.gather_with_halo(None)

    def __repr__(self) -> str:
        return (f"VertexCutGraph(rank={self.comm.rank}, masters={self.num_owned}, "
                f"mirrors={self.num_halo}, edges={self.num_edges})")


class _OwnedOnly(torch.autograd.Function):
    """One rank: ``A @ x`` with ``A.T @ g`` in backward."""

    @staticmethod
    def forward(ctx, owned, block):
        ctx.block = block
        return block.matmul(owned)

    @staticmethod
    def backward(ctx, grad):
        return ctx.block.matmul_transposed(grad.contiguous()), None
