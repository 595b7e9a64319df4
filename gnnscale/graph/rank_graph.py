"""The interface layers and the trainer use of one rank's graph, whatever the partition kind.

:class:`~.local_graph.LocalGraph` (edge cut) and :class:`~.vertex_cut.VertexCutGraph` (vertex
cut) both derive from :class:`RankGraph`. It declares what callers may rely on and holds what
both do the same way: the normalised blocks built once per kind, the staleness-policy check and
the cache of aggregates of inputs that cannot change.
"""

from __future__ import annotations

import abc
import mmap
from typing import Callable

import numpy as np
import scipy.sparse as sp
import torch

from ..comm import Communicator
from .edge_weights import edge_weights
from .halo import HaloPlan
from .tensor_cache import TensorCache


class RankGraph(abc.ABC):
    """One rank's share of the graph: ``num_owned`` owned rows, ``num_halo`` rows of other
    ranks' nodes (halo, or mirrors on a vertex cut), and the collective operations over them.

    Attributes every graph has: ``comm``, ``dtype``, ``device``, ``num_owned``, ``num_halo``,
    ``num_local`` (owned + halo), ``owned_nodes`` (global ids, ascending), ``halo_plan`` (the
    :class:`HaloPlan` of its exchanges) and ``staleness`` (a
    :class:`~.staleness.StalenessPolicy`, or None for exact halos).
    """

    comm: Communicator
    num_owned: int
    num_halo: int
    num_local: int
    owned_nodes: np.ndarray
    halo_plan: HaloPlan

    def __init__(self, comm: Communicator, dtype: torch.dtype, device):
        self.comm, self.dtype, self.device = comm, dtype, torch.device(device)
        self.staleness = None  # a staleness.StalenessPolicy; None = exact (see staleness.py)
        self._blocks: dict = {}
        # kind -> (aggregate, whether it lives outside the heap) per input tensor and version,
        # newest first, at most CONSTANT_SLOTS: the input is not kept alive by the cache (a
        # dropped-out input is new every step; holding it would keep a [num_owned, F] tensor
        # nobody can pass again), its entry goes when it dies, and a new version of it
        # replaces the old
        self._constant_cache = TensorCache(self.CONSTANT_SLOTS, forget_dead_at_once=True,
                                           one_version=True)

    #: aggregates of unchanging inputs kept per kind: two, so that the raw features'
    #: aggregate (evaluation) survives a training step that aggregates its dropped-out copy
    CONSTANT_SLOTS = 2

    @property
    @abc.abstractmethod
    def num_edges(self) -> int:
        """Edges this rank aggregates over."""

    @abc.abstractmethod
    def aggregate(self, owned: torch.Tensor, kind: str) -> torch.Tensor:
        """Normalised neighbourhood aggregation (``kind`` from
        :data:`~.edge_weights.NORMALISATIONS`) of ``owned`` rows [num_owned, F] ->
        [num_owned, F], differentiable; collective."""

    @abc.abstractmethod
    def gather_with_halo(self, owned: torch.Tensor) -> torch.Tensor:
        """``[owned; halo]`` rows [num_local, F] (differentiable), for layers that need every
        edge's source row; collective."""

    @abc.abstractmethod
    def halo_async(self, owned: torch.Tensor) -> Callable[[], torch.Tensor] | None:
        """Post the halo exchange of ``owned`` now; returns ``finish()`` giving the halo rows
        [num_halo, F], or None where there is nothing to overlap (then use
        :meth:`gather_with_halo`)."""

    @abc.abstractmethod
    def local_edge_index(self) -> torch.Tensor:
        """(2, E) local edge index: row 0 the source column in ``[0, num_local)``, row 1 the
        owned destination row."""

    def aggregate_rows(self, owned: torch.Tensor, kind: str, rows: torch.Tensor,
                       columns: torch.Tensor | None = None) -> torch.Tensor:
        """Rows ``rows`` (int64 owned row indices) of :meth:`aggregate`: ``[len(rows), F]``,
        differentiable; collective (every rank calls it, each with its own rows). This
        default aggregates every row and selects; a graph may compute only the rows asked
        for (:meth:`LocalGraph.aggregate_rows`).

        ``columns``: ``owned`` holds only these owned rows (in this order), a set
        :meth:`rows_read_by` gave for ``rows``; None: every owned row."""
        if columns is not None:
            raise ValueError(f"{type(self).__name__} aggregates every owned row: it takes no "
                             "columns (its rows_read_by gives none)")
        return self.aggregate(owned, kind).index_select(0, rows)

    def positions_in(self, rows: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
        """Where owned rows ``rows`` sit in the sorted owned rows ``columns`` (all among them),
        e.g. the loss's rows in the rows a layer before computed."""
        return torch.searchsorted(columns, rows)

    def rows_read_by(self, rows: torch.Tensor) -> torch.Tensor | None:
        """The owned rows an aggregation's rows ``rows`` read, ``rows`` among them (sorted
        int64), so that a layer feeding only those rows may compute only those; None where
        this graph cannot narrow its input (this default). Rows sent to other ranks are
        among them: peers read those whatever their own rows."""
        return None

    # -- shared by both graph kinds -----------------------------------------------------
    def active_policy(self):
        """The staleness policy inside a training step with peers, else None (exact)."""
        policy = self.staleness
        if policy is None or not policy.active or not self.halo_plan.exchanges_anything:
            return None
        return policy

    def _normalised(self, dst: np.ndarray, src: np.ndarray, kind: str, in_degree: np.ndarray,
                    self_loops: np.ndarray, num_rows: int) -> sp.csr_matrix:
        """The ``kind``-normalised adjacency [num_rows, num_local] of local edges."""
        dst, src, weights = edge_weights(dst, src, kind, in_degree, self_loops, self.num_owned)
        return sp.csr_matrix((weights, (dst, src)), shape=(num_rows, self.num_local))

    def _cached_blocks(self, kind: str, build: Callable[[], tuple]) -> tuple:
        """The blocks of ``kind`` built by ``build()`` once, then reused."""
        if kind not in self._blocks:
            self._blocks[kind] = build()
        return self._blocks[kind]

    def _constant_hit(self, owned: torch.Tensor, kind: str) -> torch.Tensor | None:
        """The stored aggregate of ``owned`` if it needs no gradient and is one of the very
        tensors, at the same version, aggregated last (e.g. raw features); else None. A hit
        moves it outside the heap if it is not there yet (see :meth:`_remember_constant`)."""
        if owned.requires_grad:
            return None
        found = self._constant_cache.get(kind, (owned,))
        if found is None:
            return None
        out, outside = found
        if not outside and out.device.type == "cpu":
            out = off_heap_copy(out)
            self._constant_cache.replace(kind, (owned,), (out, True))
        return out

    def _remember_constant(self, owned: torch.Tensor, kind: str,
                           out: torch.Tensor) -> torch.Tensor:
        """Store ``out`` as the aggregate of ``owned`` when ``owned`` needs no gradient (an
        older version of the same tensor, and the oldest beyond :data:`CONSTANT_SLOTS`, go);
        returns the aggregate to use.

        An aggregate that is reused (served again, or computed outside autograd, as in
        evaluation) moves to pages of its own, outside the heap: it lives across training
        steps, and in the kept heap a long-lived block would sit in a hole the step's large
        tensors reuse, growing the heap by them. The aggregates of inputs used once (a
        dropped-out input, new every step) stay where they are.
        """
        if owned.requires_grad:
            return out
        outside = not torch.is_grad_enabled() and out.device.type == "cpu"
        if outside:
            out = off_heap_copy(out)
        self._constant_cache.put(kind, (owned,), (out, outside))
        return out


def off_heap_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of CPU ``tensor`` in an anonymous memory map of its own (unmapped when the copy
    dies), not in the allocator's heap."""
    nbytes = tensor.numel() * tensor.element_size()
    if nbytes == 0:
        return tensor.clone()
    buffer = mmap.mmap(-1, nbytes)
    flat = torch.frombuffer(buffer, dtype=tensor.dtype, count=tensor.numel())
    return flat.view(tensor.shape).copy_(tensor)
