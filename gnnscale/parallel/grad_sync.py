"""Summing weight gradients across ranks.

Gradients are packed into flat buckets (reverse registration order, which is roughly the order
backward produces them) and each bucket is allreduced with one collective call.
"""

from __future__ import annotations

import time

import torch

from ..comm import Communicator

DEFAULT_BUCKET_BYTES = 25 * 2**20


def _buckets(params: list[torch.nn.Parameter], bucket_bytes: int) -> list[list]:
    buckets, current, size = [], [], 0
    for param in reversed(params):
        current.append(param)
        size += param.numel() * param.element_size()
        if size >= bucket_bytes:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


def allreduce_gradients(params, comm: Communicator, bucket_bytes: int = DEFAULT_BUCKET_BYTES,
                        average: bool = False) -> float:
    """Sum (or average) ``.grad`` of ``params`` over all ranks, in place. Returns seconds spent.

    A parameter without a gradient on this rank contributes zeros, so ranks whose graph part
    did not reach some parameter still take part in every collective (no hang).
    """
    start = time.perf_counter()
    params = [p for p in params if p.requires_grad]
    if comm.size == 1:
        return 0.0
    pending = []
    for bucket in _buckets(params, bucket_bytes):
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                          for p in bucket])
        pending.append((bucket, flat, comm.allreduce_async(flat)))
    for bucket, flat, work in pending:
        work.wait()
        if average:
            flat /= comm.size
        offset = 0
        for param in bucket:
            chunk = flat[offset:offset + param.numel()].view_as(param)
            if param.grad is None:
                param.grad = chunk.clone()
            else:
                param.grad.copy_(chunk)
            offset += param.numel()
    return time.perf_counter() - start
