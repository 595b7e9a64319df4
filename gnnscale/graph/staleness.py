"""Staleness policies: *when* a halo is fetched during training, never what the layers compute.

``--staleness`` picks one; each is a :class:`StalenessPolicy` attached to the graph
(``graph.staleness``) that the trainer switches on for the training step only:

- ``exact`` (default, ``graph.staleness = None``): every exchange is synchronous (overlapped
  with the inner block only); bit-for-bit the engine without this module.
- ``pipelined`` / ``pipelined:GAMMA`` (PipeGCN): in epoch t every exchange (halo rows in forward,
  halo gradients in backward) uses what was *sent in epoch t-1*; the exchange posted in epoch t
  travels during the rest of epoch t and is completed in epoch t+1. Epoch 1 fetches
  synchronously (nothing is stale yet). With ``GAMMA`` > 0 the used value is smoothed as in
  PipeGCN: ``used_t = GAMMA * used_{t-1} + (1 - GAMMA) * received_t``.
- ``delayed:R`` (DistGNN cd-R): the rows of every exchange are split into R buckets (row j of
  each peer's block in bucket ``j % R``, known to sender and receiver without communication).
  Epoch 1 fetches everything synchronously; from epoch 2 on, epoch t posts bucket ``t % R``
  asynchronously and completes it in epoch t+R, writing it into a buffer the layers read.
  Each epoch sends 1/R of the rows: the bytes drop R-fold, the values are up to ~2R epochs old.
- ``local`` (DistGNN 0c): the first epoch exchanges as ``exact``; afterwards nothing is sent:
  forward halo features are frozen at their epoch-1 values and everything that flows towards
  owners (halo gradients; vertex cut: remote partial sums and their gradients) is dropped. The
  backward is then the exact gradient of that frozen-halo model.

Evaluation (``Trainer.predict``) and ``--profile`` probes run outside the training step and so
always use exact, fresh halos, whatever the policy. Stale buffers are not checkpointed: a
resumed run starts with one synchronous fetch.

Every exchange is identified by (slot, direction) where ``slot`` counts the graph's exchanging
calls within the training step. Every rank runs the same layers, so every rank posts and
completes the same collectives in the same order.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import torch

from ..comm import Work
from .halo import HaloPlan

POLICIES = ("exact", "pipelined", "delayed", "local")
FEATURES = "features"   # owner -> replica rows used in forward (frozen by `local`)
TO_OWNER = "to_owner"   # anything summed into owners: halo gradients, partial sums (dropped)
#: the directions of an exchange key ``(slot, direction)`` that carry gradients (backward);
#: they travel as the plan's gradient wire dtype (:meth:`HaloPlan.wire_dtype`)
GRADIENT_DIRECTIONS = ("bwd", "bwd_sum")


def _post(plan: HaloPlan, key, rows: torch.Tensor, reverse: bool, counts=None):
    """Post exchange ``key`` of ``rows`` (detached) on ``plan``, with the plan's counts or
    ``counts`` = ``(send_counts, recv_counts)``."""
    send_counts, recv_counts = counts if counts is not None else plan.counts(reverse=reverse)
    return plan.post(rows.detach(), send_counts, recv_counts,
                     gradient=key[1] in GRADIENT_DIRECTIONS)


class StalenessPolicy:
    """Base: slot counting, the epoch counter and the per-epoch report."""

    name = "exact"

    def __init__(self):
        self.epoch = 0          # training steps begun
        self.active = False     # True inside a training step only
        self._slot = 0
        self._ages: list = []

    def spec(self) -> str:
        return self.name

    def begin_step(self) -> None:
        """Called by the trainer before a training step's forward."""
        self.epoch += 1
        self._slot = 0
        self._ages = []
        self.active = True

    def end_step(self) -> None:
        """Called after the step's backward: evaluation after this uses exact halos."""
        self.active = False

    def next_slot(self) -> int:
        slot = self._slot
        self._slot += 1
        return slot

    def report(self) -> dict:
        """Staleness actually used in the last step (ages in epochs of the values used)."""
        ages = self._ages or [0]
        return {"policy": self.spec(), "max_age": int(max(ages)),
                "mean_age": float(np.mean(ages)), "exchanges": len(self._ages)}

    # Two-phase exchange: `start` may post, `finish` completes. Stale policies do everything in
    # `start` (they answer from buffers), the exact one overlaps like DistributedAggregate.
    def start(self, key, rows: torch.Tensor, plan: HaloPlan, *, reverse: bool, kind: str):
        """Begin exchange ``key`` of ``rows``: owners to replicas, or with ``reverse=True``
        replicas back to owners; ``kind`` is :data:`FEATURES` or :data:`TO_OWNER`. Returns a
        handle for :meth:`finish`."""
        self._ages.append(0)
        return _post(plan, key, rows, reverse)

    def finish(self, handle, plan: HaloPlan) -> torch.Tensor:
        """The rows exchange ``handle`` delivers (fresh or stale, as the policy decides)."""
        return plan.wait(handle)

    def progress(self, handle, plan: HaloPlan):
        """What to call between a product's row blocks while exchange ``handle`` travels (the
        exchange's ``test``: MPI moves data only inside MPI calls), or None: the exchange is
        already complete (a stale policy's answer, or ``plan.overlap`` off, which waits here)."""
        if not isinstance(handle, Work):
            return None
        if not plan.overlap:
            plan.wait(handle)
            return None
        return handle.test

    def exchange(self, key, rows, plan, *, reverse: bool, kind: str) -> torch.Tensor:
        """:meth:`start` then :meth:`finish`."""
        return self.finish(self.start(key, rows, plan, reverse=reverse, kind=kind), plan)

    def close(self) -> None:
        """Complete every outstanding exchange (collective: call on every rank)."""


class ExactPolicy(StalenessPolicy):
    """Fresh fetches, overlapped with what runs between start and finish (the vertex-cut
    aggregation's default when no policy is set, and in evaluation)."""

    def start(self, key, rows, plan, *, reverse, kind):
        return _post(plan, key, rows, reverse)


class _Done:
    def __init__(self, value):
        self.value = value


class _StalePolicy(StalenessPolicy):
    def __init__(self):
        super().__init__()
        self.states: dict = {}

    def finish(self, handle, plan):
        return handle.value

    def _sync(self, key, rows, plan, reverse):
        return plan.wait(_post(plan, key, rows, reverse))


class PipelinedPolicy(_StalePolicy):
    """PipeGCN: use what was sent one epoch earlier; optional smoothing ``gamma``."""

    name = "pipelined"

    def __init__(self, gamma: float = 0.0):
        super().__init__()
        if not 0.0 <= gamma < 1.0:
            raise ValueError(f"pipelined smoothing gamma must be in [0, 1), got {gamma}")
        self.gamma = float(gamma)

    def spec(self) -> str:
        return f"pipelined:{self.gamma:g}" if self.gamma else "pipelined"

    def start(self, key, rows, plan, *, reverse, kind):
        state = self.states.get(key)
        if state is None:  # first use: nothing stale yet, fetch synchronously
            value = self._sync(key, rows, plan, reverse)
            self.states[key] = {"used": value, "pending": None}
            self._ages.append(0)
            return _Done(value)
        received = plan.wait(state["pending"]) if state["pending"] is not None \
            else state["used"]
        used = received if not self.gamma else \
            self.gamma * state["used"] + (1.0 - self.gamma) * received.to(state["used"].dtype)
        state["used"] = used
        state["pending"] = _post(plan, key, rows, reverse)
        self._ages.append(1)
        return _Done(used)

    def close(self):
        for state in self.states.values():
            if state["pending"] is not None:
                state["pending"].wait()
                state["pending"] = None


def _bucket_positions(counts, num_buckets: int):
    """For each bucket b: row positions (j % R == b inside every peer block) and per-peer counts."""
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    positions, bucket_counts = [], []
    for b in range(num_buckets):
        blocks = [offset + np.arange(b, count, num_buckets, dtype=np.int64)
                  for offset, count in zip(offsets, counts)]
        positions.append(torch.from_numpy(np.concatenate(blocks) if blocks
                                          else np.zeros(0, np.int64)))
        bucket_counts.append([int(block.size) for block in blocks])
    return positions, bucket_counts


class DelayedPolicy(_StalePolicy):
    """DistGNN cd-R: one of R buckets refreshed per epoch, used R epochs after it was sent."""

    name = "delayed"

    def __init__(self, rounds: int):
        super().__init__()
        if int(rounds) < 1:
            raise ValueError(f"delayed:R needs R >= 1, got {rounds}")
        self.rounds = int(rounds)
        self._buckets: dict = {}

    def spec(self) -> str:
        return f"delayed:{self.rounds}"

    def _layout(self, plan, reverse):
        key = (id(plan), reverse)
        if key not in self._buckets:
            send_counts, recv_counts = plan.counts(reverse=reverse)
            self._buckets[key] = (_bucket_positions(send_counts, self.rounds),
                                  _bucket_positions(recv_counts, self.rounds))
        return self._buckets[key]

    def start(self, key, rows, plan, *, reverse, kind):
        state = self.states.get(key)
        if state is None:
            value = self._sync(key, rows, plan, reverse).clone()
            self.states[key] = {"buffer": value, "sent_epoch": [self.epoch] * self.rounds,
                                "pending": deque()}
            self._ages.append(0)
            return _Done(value)
        (send_pos, send_counts), (recv_pos, recv_counts) = self._layout(plan, reverse)
        buffer, pending = state["buffer"], state["pending"]
        while pending and pending[0][0] <= self.epoch - self.rounds:
            sent_epoch, bucket, work = pending.popleft()
            buffer[recv_pos[bucket]] = plan.wait(work).to(buffer.dtype)
            state["sent_epoch"][bucket] = sent_epoch
        bucket = self.epoch % self.rounds
        work = _post(plan, key, rows.index_select(0, send_pos[bucket]), reverse,
                     (send_counts[bucket], recv_counts[bucket]))
        pending.append((self.epoch, bucket, work))
        self._ages.append(max(self.epoch - e for e in state["sent_epoch"]))
        return _Done(buffer)

    def close(self):
        for state in self.states.values():
            while state["pending"]:
                state["pending"].popleft()[2].wait()


class LocalPolicy(_StalePolicy):
    """DistGNN 0c: exchange in the first epoch only, then frozen features, dropped sums."""

    name = "local"

    def start(self, key, rows, plan, *, reverse, kind):
        state = self.states.get(key)
        if state is None:
            value = self._sync(key, rows, plan, reverse)
            self.states[key] = {"value": value, "epoch": self.epoch}
            self._ages.append(0)
            return _Done(value)
        self._ages.append(self.epoch - state["epoch"])
        if kind == FEATURES:
            return _Done(state["value"])
        return _Done(torch.zeros_like(state["value"]))


def make_policy(spec: str | None) -> StalenessPolicy | None:
    """``exact`` -> None (the unchanged engine); ``pipelined[:GAMMA]``, ``delayed:R``, ``local``."""
    text = (spec or "exact").strip().lower()
    name, _, arg = text.partition(":")
    try:
        if name == "exact" and not arg:
            return None
        if name == "pipelined":
            return PipelinedPolicy(float(arg) if arg else 0.0)
        if name == "delayed" and arg:
            return DelayedPolicy(int(arg))
        if name == "local" and not arg:
            return LocalPolicy()
    except ValueError as exc:
        raise ValueError(f"bad staleness {spec!r}: {exc}") from None
    raise ValueError(f"unknown staleness {spec!r}; choose exact, pipelined, pipelined:GAMMA "
                     f"(smoothing in [0, 1)), delayed:R (R >= 1) or local")


# -- the stale edge-cut aggregation --------------------------------------------------------

class StaleAggregate(torch.autograd.Function):
    """``A_inner @ owned + A_boundary @ halo`` with the halo (and its gradient) from a policy."""

    @staticmethod
    def forward(ctx, owned, inner, boundary, plan, policy, slot, send_index=None):
        """``send_index``: as for :func:`~.aggregate.aggregate` (``owned`` holding only some
        owned rows), default the plan's."""
        ctx.blocks = (inner, boundary, plan, policy, slot, send_index)
        halo = policy.exchange((slot, "fwd"), plan.sent_rows(owned, send_index), plan,
                               reverse=False, kind=FEATURES)
        out = inner.matmul(owned)
        if boundary.nnz:
            out = boundary.matmul(halo.to(out.dtype), add_to=out)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        inner, boundary, plan, policy, slot, send_index = ctx.blocks
        if not ctx.needs_input_grad[0]:
            return None, None, None, None, None, None, None
        grad_out = grad_out.contiguous()
        halo_grad = boundary.matmul_transposed(grad_out)
        sent_grad = policy.exchange((slot, "bwd"), halo_grad, plan, reverse=True, kind=TO_OWNER)
        grad_owned = inner.matmul_transposed(grad_out)
        plan.accumulate_into_owned(grad_owned, sent_grad, send_index)
        return grad_owned, None, None, None, None, None, None


class StaleHaloExchange(torch.autograd.Function):
    """Halo rows [num_halo, F] from a policy (for layers that need source rows, e.g. GAT)."""

    @staticmethod
    def forward(ctx, owned, plan, policy, slot):
        ctx.state = (plan, policy, slot, owned.shape[0])
        return policy.exchange((slot, "fwd"), plan.sent_rows(owned), plan,
                               reverse=False, kind=FEATURES).to(owned.dtype)

    @staticmethod
    def backward(ctx, halo_grad):
        plan, policy, slot, num_owned = ctx.state
        sent_grad = policy.exchange((slot, "bwd"), halo_grad.contiguous(), plan, reverse=True,
                                    kind=TO_OWNER)
        owned_grad = halo_grad.new_zeros((num_owned, *halo_grad.shape[1:]))
        return plan.accumulate_into_owned(owned_grad, sent_grad), None, None, None
