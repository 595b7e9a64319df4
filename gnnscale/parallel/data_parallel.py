"""Data-parallel training: gradients allreduced in buckets while backward is still running.

Every rank holds a full replica and a different slice of the batch; after ``loss.backward()``
every replica holds the mean (or sum) of all ranks' gradients, so an ordinary optimiser step
keeps the replicas identical (Goyal et al., 2017; Sergeev & Del Balso, Horovod, 2018; Li et al.,
PyTorch DDP, 2020; MG-WFBP, Shi et al., 2019).

How:

- Parameters are packed into flat buckets in *reverse registration order* (roughly the order
  backward produces their gradients), one dtype and device per bucket, each about
  ``bucket_mb`` (default: from a latency/bandwidth fit of the communicator, see
  :mod:`.bucket_size`, capped at a quarter of the model's gradients so that several buckets
  overlap with backward).
- A ``register_post_accumulate_grad_hook`` per parameter copies the finished gradient into its
  bucket. When a bucket is complete its allreduce is *posted* (asynchronously) and backward goes
  on. Buckets are always posted in index order, so every rank issues the same sequence of
  collectives even if its hooks fire in a different order.
- A callback queued on the autograd engine runs when backward ends: buckets with parameters that
  did not take part in this backward (unused parameters: they contribute zeros, or their
  gradient left from ``no_sync`` steps) are posted, all allreduces are waited for, and each
  parameter's ``.grad`` becomes a view into its bucket (no copy back; accumulation in later
  ``no_sync`` steps happens in place). Parameters no rank produced a gradient for keep
  ``grad = None``, as in one process (a per-parameter presence flag travels with each bucket).
- ``no_sync()`` skips all of this so gradients accumulate locally; the next synchronised
  backward carries the accumulated gradient.
- ``compression="fp16"|"bf16"`` sends 16-bit copies, divided by the number of ranks first
  (:mod:`.compression`).

Statistics of the last synchronised backward are in :attr:`DataParallel.stats`: seconds of
communication, the part of it exposed after backward, and the fraction hidden behind backward.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from ..comm import Communicator, Work
from .bucket_size import default_bucket_bytes, overlap_bucket_bytes
from .compression import compress, decompress, wire_dtype


class _Bucket:
    """One flat gradient buffer: ``[grads of params..., one presence flag per param]``."""

    def __init__(self, index: int, params: list[int], sizes: list[int], dtype, device,
                 wire: torch.dtype | None, comm: Communicator):
        self.index = index
        self.params = params  # indices into DataParallel._params
        self.offsets = [sum(sizes[:k]) for k in range(len(sizes))]
        self.numel = sum(sizes)
        total = self.numel + len(params)
        compressible = wire is not None and dtype in (torch.float32, torch.float64)
        if device.type == "cpu" and comm.size > 1:
            # memory the backend reduces fastest (shared memory for MPI on one host)
            self.buffer = comm.alloc_buffer(total, dtype)
            self.wire = comm.alloc_buffer(total, wire) if compressible else None
        else:
            self.buffer = torch.zeros(total, dtype=dtype, device=device)
            self.wire = torch.empty_like(self.buffer, dtype=wire) if compressible else None
        self.pending = len(params)
        self.work = None
        self.launched_at = 0.0

    def reset(self) -> None:
        self.pending = len(self.params)
        self.work = None


class DataParallel(nn.Module):
    """Synchronise the gradients of ``module`` across the ranks of ``comm`` during backward.

    Args:
        module: the model replica (same architecture on every rank).
        comm: communicator (default: ``gnnscale.comm.init()``).
        bucket_mb: bucket size in MiB; None = from the communicator's latency/bandwidth fit
            (at most a quarter of the gradients).
        compression: None/"none", "fp16" or "bf16" (see :mod:`.compression`).
        average: mean of the ranks' gradients (default) or their sum.
        broadcast_buffers: copy rank 0's buffers (batch-norm statistics) to all ranks at each
            training-mode forward, as DDP does (default True).
        sync_parameters: broadcast rank 0's parameters and buffers at construction (default True).
    Use it like the module: ``loss = criterion(dp(x), y); loss.backward(); optimizer.step()``,
    one forward per backward.
    """

    def __init__(self, module: nn.Module, comm: Communicator | None = None,
                 bucket_mb: float | None = None, compression: str | None = None, *,
                 average: bool = True, broadcast_buffers: bool = True,
                 sync_parameters: bool = True):
        super().__init__()
        if comm is None:
            from ..comm import init

            comm = init()
        self.module = module
        self.comm = comm
        self.compression = "none" if compression is None else str(compression).lower()
        self._wire_dtype = wire_dtype(self.compression)
        self.average = bool(average)
        self.broadcast_buffers = bool(broadcast_buffers)
        self._params = [p for p in module.parameters() if p.requires_grad]
        if bucket_mb is not None:
            if not bucket_mb > 0:
                raise ValueError(f"bucket_mb must be positive, got {bucket_mb}")
            self.bucket_bytes = int(bucket_mb * 2**20)
        else:
            # the fit's size, but at most a quarter of the gradients: with a single bucket
            # nothing would overlap with backward
            total = sum(p.numel() * p.element_size() for p in self._params)
            self.bucket_bytes = overlap_bucket_bytes(total, cap=default_bucket_bytes(comm))
        if sync_parameters and comm.size > 1:
            self._broadcast(list(self._params) + self._buffers_to_sync())
        self._buckets, self._where = self._build_buckets()
        self._views = [self._buckets[b].buffer[o:o + p.numel()].view_as(p)
                       for p, (b, o, _) in zip(self._params, self._where)]
        self._hooks = [p.register_post_accumulate_grad_hook(self._make_hook(i))
                       for i, p in enumerate(self._params)]
        self._sync = True
        self._in_backward = False
        self._fired = [False] * len(self._params)
        self._present = [False] * len(self._params)
        self._next = 0  # buckets [0, _next) are posted
        self._finished = 0  # buckets [0, _finished) are known to have completed
        self.stats: dict[str, float] = {}

    # -- set-up ---------------------------------------------------------------------------
    def _build_buckets(self):
        open_buckets: dict[tuple, tuple[list, list, int]] = {}
        groups: list[tuple[tuple, list, list]] = []
        for index in reversed(range(len(self._params))):
            param = self._params[index]
            key = (param.dtype, param.device)
            if key not in open_buckets:
                open_buckets[key] = ([], [], 0)
                groups.append((key, open_buckets[key][0], open_buckets[key][1]))
            members, sizes, nbytes = open_buckets[key]
            members.append(index)
            sizes.append(param.numel())
            nbytes += param.numel() * param.element_size()
            open_buckets[key] = (members, sizes, nbytes)
            if nbytes >= self.bucket_bytes:
                del open_buckets[key]
        buckets, where = [], [None] * len(self._params)
        for number, ((dtype, device), members, sizes) in enumerate(groups):
            bucket = _Bucket(number, members, sizes, dtype, device, self._wire_dtype,
                             self.comm)
            for slot, index in enumerate(members):
                where[index] = (number, bucket.offsets[slot], slot)
            buckets.append(bucket)
        return buckets, where

    def _buffers_to_sync(self) -> list[torch.Tensor]:
        return [b for b in self.module.buffers() if b.dtype.is_floating_point or
                b.dtype in (torch.int64, torch.int32)]

    def _broadcast(self, tensors: list[torch.Tensor]) -> None:
        """Overwrite ``tensors`` with rank 0's values (one broadcast per dtype and device)."""
        by_kind: dict[tuple, list[torch.Tensor]] = {}
        for tensor in tensors:
            by_kind.setdefault((tensor.dtype, tensor.device), []).append(tensor)
        for group in by_kind.values():
            with torch.no_grad():
                flat = _flatten_dense_tensors([t.detach() for t in group])
                self.comm.broadcast(flat, root=0)
                for tensor, value in zip(group, _unflatten_dense_tensors(flat, group)):
                    tensor.copy_(value)

    # -- forward --------------------------------------------------------------------------
    def forward(self, *args, **kwargs) -> Any:
        multi = self.comm.size > 1
        if multi and self._sync and self.broadcast_buffers and self.training:
            buffers = self._buffers_to_sync()
            if buffers:
                self._broadcast(buffers)
        output = self.module(*args, **kwargs)
        if multi and self._sync and torch.is_grad_enabled():
            self._hook_outputs(output)
        return output

    def _hook_outputs(self, output) -> None:
        """Start the step when backward reaches an output, even if no parameter is used."""
        if isinstance(output, torch.Tensor):
            if output.requires_grad:
                output.register_hook(self._on_output_grad)
        elif isinstance(output, (list, tuple)):
            for item in output:
                self._hook_outputs(item)
        elif isinstance(output, dict):
            for item in output.values():
                self._hook_outputs(item)

    def _on_output_grad(self, _grad):
        self._start_backward()

    # -- during backward ------------------------------------------------------------------
    def _start_backward(self) -> None:
        if not self._in_backward and self._sync:
            self._in_backward = True
            self._backward_start = time.perf_counter()
            torch.autograd.Variable._execution_engine.queue_callback(self._finalize)

    def _make_hook(self, index: int):
        def hook(param: torch.Tensor) -> None:
            if not self._sync or self.comm.size == 1:
                return
            self._start_backward()
            if self._fired[index]:
                return
            self._fired[index] = True
            bucket = self._buckets[self._where[index][0]]
            self._fill(bucket, index)
            bucket.pending -= 1
            if bucket.pending == 0:
                self._launch_ready()
            for launched in self._buckets[self._finished:self._next]:
                # notes completion times, and drives MPI's progress for non-threaded requests
                if not launched.work.test():
                    break
                self._finished += 1

        return hook

    def _fill(self, bucket: _Bucket, index: int) -> None:
        """Put parameter ``index``'s gradient (or zeros) in ``bucket``; note its presence."""
        param, view = self._params[index], self._views[index]
        grad = param.grad
        scale = 1.0 / self.comm.size if self.average else 1.0
        if grad is None:
            view.zero_()
        elif grad.data_ptr() != view.data_ptr():
            if grad.is_sparse:
                raise ValueError("DataParallel does not handle sparse gradients")
            # averaging folded into the copy: no extra pass over the bucket afterwards
            torch.mul(grad, scale, out=view) if scale != 1.0 else view.copy_(grad)
        elif scale != 1.0:
            view.mul_(scale)  # accumulated in place (no_sync): scale where it lies
        self._present[index] = grad is not None

    def _payload(self, bucket: _Bucket) -> torch.Tensor:
        """Write the presence flags, compress if asked; the tensor to allreduce."""
        bucket.buffer[bucket.numel:].copy_(torch.tensor(
            [float(self._present[i]) for i in bucket.params], dtype=bucket.buffer.dtype))
        bucket.launched_at = time.perf_counter()
        if bucket.wire is None:
            return bucket.buffer
        # divided by the number of ranks before the cast (overflow), unless the fill did so
        # already (averaging)
        return compress(bucket.buffer, 1 if self.average else self.comm.size,
                        bucket.wire.dtype, out=bucket.wire)

    def _launch_ready(self) -> None:
        """Post every complete bucket, in index order (the same order on every rank)."""
        while self._next < len(self._buckets) and self._buckets[self._next].pending == 0:
            bucket = self._buckets[self._next]
            bucket.work = self.comm.allreduce_async(self._payload(bucket))
            self._next += 1

    def _finalize(self) -> None:
        """End of backward: post what is left, wait, and point ``.grad`` at the results."""
        backward_end = time.perf_counter()
        try:
            for bucket in self._buckets[:self._next]:
                bucket.work.wait()
            # what is left runs now, blocking: nothing remains to overlap with, and a blocking
            # call may skip the hand-over to the communication thread
            for bucket in self._buckets[self._next:]:
                for index in bucket.params:
                    if not self._fired[index]:
                        self._fill(bucket, index)
                bucket.pending = 0
                payload = self._payload(bucket)
                self.comm.allreduce(payload)
                bucket.work = Work(result=payload)
                bucket.work.started_at = bucket.launched_at
                bucket.work.finished_at = time.perf_counter()
            self._next = len(self._buckets)
            waited = time.perf_counter()
            size = self.comm.size
            for bucket in self._buckets:
                if bucket.wire is not None:
                    decompress(bucket.wire, bucket.buffer, size, self.average)
                present = bucket.buffer[bucket.numel:].tolist()
                for slot, index in enumerate(bucket.params):
                    param = self._params[index]
                    if present[slot] > 0:
                        view = self._views[index]
                        if param.grad is None or param.grad.data_ptr() != view.data_ptr():
                            param.grad = view
                    else:
                        param.grad = None
            self._record_stats(backward_end, waited)
        finally:
            for bucket in self._buckets:
                bucket.reset()
            self._fired = [False] * len(self._params)
            self._next = 0
            self._finished = 0
            self._in_backward = False

    def _record_stats(self, backward_end: float, waited: float) -> None:
        intervals = sorted(((b.work.started_at or b.launched_at), (b.work.finished_at or waited))
                           for b in self._buckets)
        busy, current_start, current_end = 0.0, None, None
        for start, end in intervals:
            if current_end is None or start > current_end:
                if current_end is not None:
                    busy += current_end - current_start
                current_start, current_end = start, end
            else:
                current_end = max(current_end, end)
        if current_end is not None:
            busy += current_end - current_start
        exposed = waited - backward_end
        self.stats = {"backward_s": backward_end - self._backward_start, "comm_s": busy,
                      "exposed_comm_s": exposed, "buckets": len(self._buckets),
                      "hidden_fraction": max(0.0, 1.0 - exposed / busy) if busy > 0 else 1.0,
                      "bytes": sum(b.buffer.numel() * (b.wire if b.wire is not None
                                                       else b.buffer).element_size()
                                   for b in self._buckets)}

    # -- public helpers -------------------------------------------------------------------
    @contextmanager
    def no_sync(self):
        """Accumulate gradients locally; the next backward outside the block synchronises."""
        previous = self._sync
        self._sync = False
        try:
            yield
        finally:
            self._sync = previous

    def bucket_layout(self) -> list[list[str]]:
        """Parameter names per bucket, in posting order (for inspection and tests)."""
        names = {id(p): n for n, p in self.module.named_parameters()}
        return [[names.get(id(self._params[i]), f"param{i}") for i in b.params]
                for b in self._buckets]

    def remove_hooks(self) -> None:
        """Detach from the module (gradients are no longer synchronised)."""
        for handle in self._hooks:
            handle.remove()
        self._hooks = []
