"""Large-batch training recipes: LARS, linear learning-rate scaling with gradual warmup, label
smoothing, and mixed precision.

- Goyal et al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour" (2017): with ``k``
  times the batch, use ``k`` times the learning rate (:func:`scaled_lr`), reached by a linear
  warmup over the first epochs (:func:`warmup_schedule`).
- You et al., "Large Batch Training of Convolutional Networks" (2017): LARS gives every layer a
  learning rate proportional to ``||w|| / ||grad + wd w||`` (:class:`LARS`).
- Szegedy et al. (2016): label smoothing (:func:`label_smoothing_cross_entropy`).
- Jia et al. (2018), Micikevicius et al. (2018): mixed precision (:func:`autocast`); bf16 on CPU
  needs no loss scaling, fp16 on GPU does (``torch.amp.GradScaler``).
"""

from __future__ import annotations

import math
from contextlib import nullcontext

import torch
from torch.nn import functional as F
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def scaled_lr(base_lr: float, global_batch: int, base_batch: int = 256) -> float:
    """Linear scaling rule: ``base_lr * global_batch / base_batch``."""
    if global_batch <= 0 or base_batch <= 0:
        raise ValueError(f"batch sizes must be positive, got {global_batch} and {base_batch}")
    return base_lr * global_batch / base_batch


def warmup_factor(step: int, warmup_steps: int, start_factor: float = 0.0,
                  total_steps: int | None = None, decay: str = "none") -> float:
    """Multiplier of the target learning rate at ``step`` (0-based).

    Linear from ``start_factor`` to 1 over ``warmup_steps`` steps, then ``decay``: ``"none"``
    (constant) or ``"cosine"`` (to 0 at ``total_steps``).
    """
    if warmup_steps > 0 and step < warmup_steps:
        return start_factor + (1.0 - start_factor) * (step + 1) / warmup_steps
    if decay == "none" or total_steps is None:
        return 1.0
    if decay == "cosine":
        span = max(total_steps - warmup_steps, 1)
        progress = min(max(step - warmup_steps, 0) / span, 1.0)
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown decay {decay!r}; choose 'none' or 'cosine'")


def warmup_schedule(optimizer: Optimizer, warmup_steps: int, start_factor: float = 0.0,
                    total_steps: int | None = None, decay: str = "none") -> LambdaLR:
    """A ``LambdaLR`` following :func:`warmup_factor` (call ``.step()`` once per iteration).

    Set the optimiser's lr to the *scaled* target (:func:`scaled_lr`); Goyal et al. start from
    the unscaled rate, i.e. ``start_factor = base_batch / global_batch``.
    """
    return LambdaLR(optimizer, lambda step: warmup_factor(step, warmup_steps, start_factor,
                                                          total_steps, decay))


class LARS(Optimizer):
    """SGD with momentum and layer-wise adaptive rate scaling (You et al., 2017).

    For each parameter tensor ``w`` with gradient ``g``::

        d     = g + weight_decay * w
        trust = trust_coefficient * ||w|| / ||d||     (1 if either norm is 0)
        v     = momentum * v + lr * trust * d
        w     = w - v

    Args:
        params: parameters or parameter groups.
        lr: global learning rate (default 0.1).
        momentum: default 0.9.
        weight_decay: default 0.
        trust_coefficient: ``eta`` of the paper (default 0.001).
        adapt_1d: also adapt (and decay) 1-D tensors: biases and batch-norm weights; off by
            default, as in common practice (they use plain SGD with momentum).
    """

    def __init__(self, params, lr: float = 0.1, momentum: float = 0.9, weight_decay: float = 0.0,
                 trust_coefficient: float = 0.001, adapt_1d: bool = False):
        if lr <= 0 or momentum < 0 or weight_decay < 0 or trust_coefficient <= 0:
            raise ValueError(f"invalid LARS hyper-parameters: lr={lr}, momentum={momentum}, "
                             f"weight_decay={weight_decay}, trust_coefficient={trust_coefficient}")
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                                      trust_coefficient=trust_coefficient, adapt_1d=adapt_1d))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                grad = param.grad
                adapt = param.ndim > 1 or group["adapt_1d"]
                if adapt:
                    if group["weight_decay"]:
                        grad = grad.add(param, alpha=group["weight_decay"])
                    w_norm, g_norm = torch.linalg.vector_norm(param), torch.linalg.vector_norm(grad)
                    trust = torch.where((w_norm > 0) & (g_norm > 0),
                                        group["trust_coefficient"] * w_norm / g_norm,
                                        torch.ones_like(w_norm))
                    update = grad * trust
                else:
                    update = grad
                state = self.state[param]
                if group["momentum"]:
                    buffer = state.get("momentum_buffer")
                    if buffer is None:
                        buffer = state["momentum_buffer"] = torch.zeros_like(param)
                    buffer.mul_(group["momentum"]).add_(update, alpha=group["lr"])
                    param.sub_(buffer)
                else:
                    param.sub_(update, alpha=group["lr"])
        return loss


def label_smoothing_cross_entropy(logits: torch.Tensor, target: torch.Tensor,
                                  smoothing: float = 0.1, reduction: str = "mean") -> torch.Tensor:
    """Cross entropy against ``(1 - smoothing) * one_hot + smoothing / classes``.

    Shapes: ``logits [N, C]``, ``target [N]`` (class indices) -> scalar (or ``[N]`` for
    ``reduction="none"``). Equal to ``F.cross_entropy(..., label_smoothing=smoothing)``.
    """
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    log_probs = F.log_softmax(logits.float(), dim=-1)
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_probs.mean(dim=-1)
    loss = (1.0 - smoothing) * nll + smoothing * uniform
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"unknown reduction {reduction!r}")


def autocast(precision: str = "fp32", device_type: str = "cpu"):
    """Context for the forward pass: ``"fp32"`` (nothing), ``"bf16"`` or ``"fp16"`` autocast.

    fp16 is for CUDA and needs ``torch.amp.GradScaler``; bf16 works on CPU and GPU unscaled.
    """
    if precision == "fp32":
        return nullcontext()
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    if precision not in dtypes:
        raise ValueError(f"unknown precision {precision!r}; choose fp32, bf16 or fp16")
    if precision == "fp16" and device_type == "cpu":
        raise ValueError("fp16 autocast is for CUDA; use bf16 on CPU")
    return torch.autocast(device_type=device_type, dtype=dtypes[precision])
