"""Halo plans and the halo exchange.

A :class:`HaloPlan` says which owned rows this rank sends to each peer (``send_index`` grouped by
peer, ``send_counts``) and how many halo rows arrive from each peer (``recv_counts``); halo rows
from peer ``q`` form one contiguous block, in the order ``q`` sends them.

Forward of the exchange gathers the requested rows and ``alltoallv``'s them; backward is the
reverse ``alltoallv`` of the halo gradients (send and receive counts swapped) followed by an
``index_add`` into the owners' rows, so a row needed by several peers gets all their gradients.

How the exchanges travel is set with :meth:`HaloPlan.configure`: overlapped with local compute
or waited for at once, in which dtype rows go on the wire, and over the real network or a
simulated slow one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..comm import Communicator, Work
from .quantize import QuantizedWire, exchange_key
from .staleness_netsim import SlowNetwork

_UNCHANGED = object()
#: an aggregation's exchange goes in column blocks when the largest send or receive buffer of
#: any rank would exceed this (:meth:`HaloPlan.column_blocks`)
DEFAULT_CHUNK_BYTES = 64 * 2**20


@dataclass
class CommStats:
    """Counters the exchange updates; the engine reads and resets them every epoch."""

    halo_wait_s: float = 0.0
    halo_bytes_sent: int = 0
    exchanges: int = 0

    def reset(self) -> "CommStats":
        snapshot = CommStats(self.halo_wait_s, self.halo_bytes_sent, self.exchanges)
        self.halo_wait_s, self.halo_bytes_sent, self.exchanges = 0.0, 0, 0
        return snapshot


@dataclass
class HaloPlan:
    """Who sends which rows to whom, for one rank."""

    comm: Communicator
    num_owned: int
    num_halo: int
    send_index: torch.Tensor  # int64 [sum(send_counts)], local owned rows
    send_counts: list
    recv_counts: list
    stats: CommStats = field(default_factory=CommStats)
    # how exchanges travel: read them here, set them with configure()
    overlap: bool = True
    message_dtype: torch.dtype | QuantizedWire | None = None
    gradient_dtype: object = None
    quantize_seed: int = 0
    align_posts: bool = False
    chunk_bytes: int | None = DEFAULT_CHUNK_BYTES
    _largest_rows: int | None = field(default=None, repr=False)
    _quantized_posts: int = field(default=0, repr=False)

    @classmethod
    def from_part_view(cls, view, comm: Communicator, device="cpu") -> "HaloPlan":
        if view.num_parts != comm.size:
            raise ValueError(f"the partition has {view.num_parts} parts but the job has "
                             f"{comm.size} ranks; partition into {comm.size} parts")
        return cls(comm=comm, num_owned=view.num_owned, num_halo=view.num_halo,
                   send_index=torch.from_numpy(np.asarray(view.send_index, np.int64)).to(device),
                   send_counts=[int(c) for c in view.send_counts],
                   recv_counts=[int(c) for c in view.recv_counts])

    @property
    def exchanges_anything(self) -> bool:
        return self.comm.size > 1

    def configure(self, *, overlap=_UNCHANGED, message_dtype=_UNCHANGED,
                  gradient_dtype=_UNCHANGED, quantize_seed=_UNCHANGED,
                  simulate_network=_UNCHANGED, align_posts=_UNCHANGED,
                  chunk_bytes=_UNCHANGED) -> "HaloPlan":
        """Set how exchanges travel; arguments not given stay as they are. Returns the plan.

        Args:
            overlap: True (default): layers compute on owned rows while the halo travels;
                False: every exchange is waited for right after it is posted (the same numbers,
                all of the communication exposed; for measuring what overlap hides).
            message_dtype: dtype of the rows on the wire, e.g. ``torch.bfloat16`` halves the
                bytes, or a :class:`~.quantize.QuantizedWire` (8, 4 or 2 bits per value, a
                scale and offset per row, stochastic rounding; CPU tensors only); rows
                arrive converted back. None (default): the rows' own dtype.
            gradient_dtype: the same for halo gradients (and everything else sent back
                towards owners in backward). None (default): :func:`gradient_wire` of
                ``message_dtype``, i.e. the same as the rows.
            quantize_seed: the run's seed, mixed with the rank and a counter of quantized
                exchanges into each exchange's rounding key (:func:`~.quantize.exchange_key`);
                setting it counts the exchanges from 0 again, so the same seed on the same
                partition gives the same bits. Default 0.
            simulate_network: ``(latency_s, bytes_per_s)``: every exchange completes no earlier
                than its latency plus its bytes over that bandwidth after it was posted (a
                simulated slow network, :mod:`.staleness_netsim`); None: the real network.
            align_posts: True: every rank meets at a barrier before each post, so a wait
                measures the exchange itself, not a slower peer arriving late (the trainer's
                overlap probe only). Default False.
            chunk_bytes: largest send or receive buffer of one aggregation's exchange; wider
                rows go in column blocks (:meth:`column_blocks`), so a rank never holds its
                whole halo of a wide layer at once. None: one exchange per aggregation.
                Default :data:`DEFAULT_CHUNK_BYTES`. Must be the same on every rank.
        """
        if overlap is not _UNCHANGED:
            self.overlap = bool(overlap)
        if message_dtype is not _UNCHANGED:
            _check_wire(message_dtype, "message_dtype")
            self.message_dtype = message_dtype
        if gradient_dtype is not _UNCHANGED:
            _check_wire(gradient_dtype, "gradient_dtype")
            self.gradient_dtype = gradient_dtype
        if quantize_seed is not _UNCHANGED:  # and the exchanges are counted from 0 again
            self.quantize_seed, self._quantized_posts = int(quantize_seed), 0
        if simulate_network is not _UNCHANGED:
            real = self.comm.inner if isinstance(self.comm, SlowNetwork) else self.comm
            self.comm = real if simulate_network is None else SlowNetwork(real,
                                                                          *simulate_network)
        if align_posts is not _UNCHANGED:
            self.align_posts = bool(align_posts)
        if chunk_bytes is not _UNCHANGED:
            if chunk_bytes is not None and (not isinstance(chunk_bytes, int)
                                            or isinstance(chunk_bytes, bool)
                                            or chunk_bytes < 1):
                raise ValueError(f"chunk_bytes must be a positive int or None, got "
                                 f"{chunk_bytes!r}")
            self.chunk_bytes = chunk_bytes
        return self

    @property
    def quantized_exchanges(self) -> int:
        """How many quantized exchanges this plan has posted since ``quantize_seed`` was set:
        the counter in each exchange's rounding key (:func:`~.quantize.exchange_key`). A
        checkpoint keeps it, so a resumed run rounds as the run that never stopped."""
        return self._quantized_posts

    @quantized_exchanges.setter
    def quantized_exchanges(self, count: int) -> None:
        self._quantized_posts = int(count)

    def column_blocks(self, width: int, element_size: int, *,
                      gradient: bool = False) -> list[slice]:
        """Column ranges of ``[rows, width]`` features to exchange one after the other: one
        range unless the largest send or receive buffer of any rank (one all-reduce, the first
        time) would exceed ``chunk_bytes``; then as few equal blocks as keep each under it (at
        least one column). A buffer is sized as the rows travel: :meth:`wire_dtype`'s bytes
        (``gradient``: the gradients' format), ``element_size`` (the tensor's) where rows
        travel in their own dtype, and a quantized row's packed codes plus its scale and
        offset, so int2 rows go in blocks about 16 times wider than float32 ones. Every rank
        gets the same blocks, as the exchanges must match."""
        if self.chunk_bytes is None or width <= 1 or not self.exchanges_anything:
            return [slice(0, width)]
        if self._largest_rows is None:
            mine = max(int(sum(self.send_counts)), int(self.num_halo))
            self._largest_rows = int(self.comm.allreduce_scalar(float(mine), op="max"))
        rows = max(1, self._largest_rows)
        row_bytes = self.wire_row_bytes(element_size, gradient=gradient)
        if rows * row_bytes(width) <= self.chunk_bytes:
            return [slice(0, width)]
        fits, too_wide = 1, width  # the widest block that fits (bytes grow with columns)
        while fits < too_wide:
            mid = (fits + too_wide + 1) // 2
            if rows * row_bytes(mid) <= self.chunk_bytes:
                fits = mid
            else:
                too_wide = mid - 1
        blocks = -(-width // fits)
        step = -(-width // blocks)
        return [slice(lo, min(width, lo + step)) for lo in range(0, width, step)]

    def wire_row_bytes(self, element_size: int, *, gradient: bool = False):
        """``columns -> bytes`` of one row on the wire as :meth:`post` sends it: rows of
        ``element_size`` bytes per value in :meth:`wire_dtype` (None: their own dtype)."""
        dtype = self.wire_dtype(gradient)
        if isinstance(dtype, QuantizedWire):
            return dtype.row_bytes
        size = element_size if dtype is None else torch.empty((), dtype=dtype).element_size()
        return lambda columns: columns * size

    def counts(self, reverse: bool = False) -> tuple[list, list]:
        """``(send_counts, recv_counts)`` of a forward exchange (owners to halos), or with
        ``reverse=True`` of a reverse one (halos back to their owners)."""
        if reverse:
            return self.recv_counts, self.send_counts
        return self.send_counts, self.recv_counts

    def wire_dtype(self, gradient: bool = False):
        """What rows of this plan travel as: :attr:`message_dtype`, or for gradients
        :attr:`gradient_dtype` (None: :func:`gradient_wire` of the message dtype)."""
        if not gradient:
            return self.message_dtype
        return self.gradient_dtype if self.gradient_dtype is not None \
            else gradient_wire(self.message_dtype)

    def post(self, rows: torch.Tensor, send_counts, recv_counts, *,
             gradient: bool = False) -> Work:
        """Start an alltoallv of ``rows`` (block ``q`` to rank ``q``) as configured; ``wait()``
        gives the received rows in ``rows``' dtype. ``gradient``: the rows are gradients
        travelling in backward (they go as :meth:`wire_dtype` says). Counted in
        :attr:`stats` (the bytes on the wire, metadata of quantized rows included)."""
        if self.align_posts:
            self.comm.barrier()
        dtype = self.wire_dtype(gradient)
        if isinstance(dtype, QuantizedWire):
            key = exchange_key(self.quantize_seed, self.comm.rank, self._quantized_posts)
            self._quantized_posts += 1
            wire = dtype.encode(rows, key)
        else:
            wire = rows if dtype in (None, rows.dtype) else rows.to(dtype)
        self.stats.halo_bytes_sent += wire.numel() * wire.element_size()
        self.stats.exchanges += 1
        work = self.comm.alltoallv_async(wire.contiguous(), send_counts, recv_counts)
        if isinstance(dtype, QuantizedWire):
            row_shape, out_dtype = tuple(rows.shape[1:]), rows.dtype
            return Work(lambda: dtype.decode(work.wait(), row_shape, out_dtype),
                        test_fn=work.test)
        if wire.dtype == rows.dtype:
            return work
        return Work(lambda: work.wait().to(rows.dtype), test_fn=work.test)

    def post_forward(self, owned: torch.Tensor, send_index: torch.Tensor | None = None) -> Work:
        """Start sending requested owned rows; ``wait()`` gives the halo rows [num_halo, F].
        ``send_index``: where the sent rows sit in ``owned`` when it holds only some owned
        rows (:meth:`send_positions`); default :attr:`send_index` (every owned row)."""
        return self.post(self.sent_rows(owned, send_index), *self.counts())

    def sent_rows(self, owned: torch.Tensor, send_index: torch.Tensor | None = None
                  ) -> torch.Tensor:
        """The rows of ``owned`` this rank sends, grouped by peer; ``send_index`` as for
        :meth:`post_forward`."""
        return owned.index_select(0, self.send_index if send_index is None else send_index)

    def post_backward(self, halo_grad: torch.Tensor) -> Work:
        """Start returning halo gradients to their owners; ``wait()`` gives the sent-row grads."""
        return self.post(halo_grad, *self.counts(reverse=True), gradient=True)

    def wait(self, work: Work) -> torch.Tensor:
        """Complete ``work``, charging the blocked time to ``stats.halo_wait_s``."""
        start = time.perf_counter()
        result = work.wait()
        self.stats.halo_wait_s += time.perf_counter() - start
        return result

    def accumulate_into_owned(self, owned_grad: torch.Tensor, sent_grad: torch.Tensor,
                              send_index: torch.Tensor | None = None):
        """Add gradients that came back for sent rows into their owned rows (in place);
        ``send_index`` as for :meth:`post_forward`."""
        if sent_grad.shape[0]:
            index = self.send_index if send_index is None else send_index
            owned_grad.index_add_(0, index, sent_grad.to(owned_grad.dtype))
        return owned_grad

    def send_positions(self, columns: torch.Tensor) -> torch.Tensor:
        """Where the sent rows sit among the sorted owned rows ``columns`` (every sent row
        among them): the ``send_index`` of a tensor holding only those rows."""
        positions = torch.searchsorted(columns, self.send_index)
        if positions.numel() and (int(positions.max()) >= columns.numel() or not torch.equal(
                columns.index_select(0, positions), self.send_index)):
            raise ValueError("send_positions: a sent row is not among the columns given")
        return positions


def gradient_wire(message_dtype):
    """The wire format of halo gradients when only the rows' is set: the rows' own. Halo
    gradients travel at the rows' width: with int2 and int4 rows, int8 gradients gave the
    same accuracy as same-width ones on Cora and CiteSeer (``benchmarks/
    quantized_halo_accuracy.py``), for more bytes; ``gradient_dtype`` sets them apart."""
    return message_dtype


def _check_wire(dtype, name: str) -> None:
    if dtype is not None and not isinstance(dtype, (torch.dtype, QuantizedWire)):
        raise ValueError(f"{name} must be a torch.dtype, a QuantizedWire or None, got "
                         f"{dtype!r}")


class HaloExchange(torch.autograd.Function):
    """``halo = HaloExchange.apply(owned, plan)``: differentiable fetch of the halo rows."""

    @staticmethod
    def forward(ctx, owned: torch.Tensor, plan: HaloPlan) -> torch.Tensor:
        ctx.plan = plan
        ctx.num_owned = owned.shape[0]
        return plan.wait(plan.post_forward(owned))

    @staticmethod
    def backward(ctx, halo_grad: torch.Tensor):
        plan = ctx.plan
        sent_grad = plan.wait(plan.post_backward(halo_grad))
        owned_grad = halo_grad.new_zeros((ctx.num_owned, *halo_grad.shape[1:]))
        return plan.accumulate_into_owned(owned_grad, sent_grad), None


@dataclass
class PendingExchange:
    """The exchanges in flight between a :class:`HaloPost` and its :class:`HaloReceive`."""

    forward: Work | None = None  # owned rows on their way to the peers' halos
    backward: Work | None = None  # halo gradients on their way back to their owners


class HaloPost(torch.autograd.Function):
    """``token = HaloPost.apply(owned, plan, pending)``: post the halo exchange of ``owned``
    now; :class:`HaloReceive` later gives the rows, so local work can run in between.

    Backward runs after everything computed between the two (autograd runs later-created
    nodes first), so the reverse exchange that :class:`HaloReceive`'s backward posted travels
    while that work's backward runs; here it is waited for and the returned rows are added
    into their owners' gradients."""

    @staticmethod
    def forward(ctx, owned: torch.Tensor, plan: HaloPlan, pending: PendingExchange):
        pending.forward = plan.post_forward(owned)
        ctx.plan, ctx.pending = plan, pending
        ctx.owned_shape, ctx.owned_dtype = owned.shape, owned.dtype
        return owned.new_empty(0)

    @staticmethod
    def backward(ctx, _token_grad):
        plan, pending = ctx.plan, ctx.pending
        if pending.backward is None:  # the halo rows took no part in the loss
            return None, None, None
        sent_grad = plan.wait(pending.backward)
        pending.backward = None
        owned_grad = sent_grad.new_zeros(ctx.owned_shape, dtype=ctx.owned_dtype)
        return plan.accumulate_into_owned(owned_grad, sent_grad), None, None


class HaloReceive(torch.autograd.Function):
    """``halo = HaloReceive.apply(token, plan, pending)``: the halo rows of the exchange a
    :class:`HaloPost` posted. Backward posts the reverse exchange of the halo gradients and
    leaves the wait to :class:`HaloPost` (with ``plan.overlap`` off it waits at once)."""

    @staticmethod
    def forward(ctx, token: torch.Tensor, plan: HaloPlan, pending: PendingExchange):
        ctx.plan, ctx.pending = plan, pending
        halo = plan.wait(pending.forward)
        pending.forward = None
        return halo

    @staticmethod
    def backward(ctx, halo_grad: torch.Tensor):
        plan, pending = ctx.plan, ctx.pending
        work = plan.post_backward(halo_grad.contiguous())
        if not plan.overlap:  # measuring: wait at once, all of the exchange exposed
            rows = plan.wait(work)
            work = Work(result=rows)
        pending.backward = work
        return halo_grad.new_empty(0), None, None


def post_halo(owned: torch.Tensor, plan: HaloPlan):
    """Post the halo exchange of ``owned`` now; returns ``finish()`` giving the halo rows
    [num_halo, F] (differentiable, the reverse exchange overlapped with the backward of what
    runs in between). With ``plan.overlap`` off the exchange is waited for at once."""
    pending = PendingExchange()
    token = HaloPost.apply(owned, plan, pending)
    if not plan.overlap:
        halo = HaloReceive.apply(token, plan, pending)
        return lambda: halo
    return lambda: HaloReceive.apply(token, plan, pending)


def exchange_halo(owned: torch.Tensor, plan: HaloPlan) -> torch.Tensor:
    """Owned rows -> ``[owned; halo]`` rows (differentiable). One rank: returns ``owned``."""
    if plan.num_halo == 0 and not plan.exchanges_anything:
        return owned
    return torch.cat([owned, HaloExchange.apply(owned, plan)], dim=0)
