"""Normalisation over the *whole* graph, when each rank holds only some of its nodes.

Batch norm (and PyG's graph-mode layer norm) normalise with statistics over all nodes. Each rank
sums its own rows and one allreduce makes the global sums, so every rank normalises with the
same mean and variance that one process on the whole graph would compute; the allreduce is
differentiable (its backward is another allreduce), so gradients are those of the whole graph
too. Sums are taken in float64 around a shift (the running mean, identical on every rank), so
the one-pass variance keeps its precision.

Node-wise layer norm needs no communication and is ``torch.nn.LayerNorm``. All norms here are
called as ``norm(x, graph)``, like the graph layers.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..comm import Communicator
from ..graph import RankGraph


class _AllReduceSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor: torch.Tensor, comm: Communicator) -> torch.Tensor:
        ctx.comm = comm
        return comm.allreduce(tensor.detach().clone().contiguous())

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        # d(sum over ranks)/d(this rank's part): every rank's upstream gradient, summed.
        return ctx.comm.allreduce(grad.detach().clone().contiguous()), None


def global_sum(tensor: torch.Tensor, comm: Communicator) -> torch.Tensor:
    """Element-wise sum of ``tensor`` over all ranks, differentiable (collective: every rank
    calls it, in the same order)."""
    if comm.size == 1:
        return tensor
    return _AllReduceSum.apply(tensor, comm)


def global_moments(x: torch.Tensor, comm: Communicator, shift: torch.Tensor | None = None,
                   dim=0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Global (mean, biased variance, count) of ``x`` reduced over ``dim`` across all ranks.

    float64 results, differentiable; one allreduce. ``shift`` (same on every rank) is
    subtracted before summing, for precision.
    """
    d = x.double()
    if shift is not None:
        d = d - shift.detach().double()
    count = 1
    for axis in ([dim] if isinstance(dim, int) else dim):
        count *= x.shape[axis]
    local = torch.cat([d.sum(dim).reshape(-1), (d * d).sum(dim).reshape(-1),
                       d.new_tensor([float(count)])])
    total = global_sum(local, comm)
    n = total[-1].detach().clamp(min=1.0)
    width = (total.numel() - 1) // 2
    mean_shifted = total[:width] / n
    var = (total[width:2 * width] / n - mean_shifted * mean_shifted).clamp(min=0.0)
    mean = mean_shifted + shift.detach().double() if shift is not None else mean_shifted
    return mean, var, total[-1].detach()


class DistributedBatchNorm(nn.Module):
    r"""Batch normalisation of Ioffe & Szegedy, "Batch Normalization: Accelerating Deep Network
    Training by Reducing Internal Covariate Shift" (ICML 2015), over all nodes of all ranks:

    .. math:: x'_i = \frac{x_i - \mu}{\sqrt{\sigma^2 + \epsilon}} \odot \gamma + \beta

    with :math:`\mu, \sigma^2` the per-feature mean and biased variance over every node of the
    graph while training (one allreduce), and the running estimates in eval mode. Equals
    ``torch.nn.BatchNorm1d`` (and PyG's ``BatchNorm``) applied to the whole graph, running
    statistics included (updated with the unbiased variance).

    Args:
        num_features: feature width F.
        eps: added to the variance (default 1e-5).
        momentum: running-statistics update rate (default 0.1).
        affine: learnable :math:`\gamma, \beta` (default True).
        track_running_stats: keep running estimates for eval mode (default True).

    Shapes: x ``[num_owned, F]`` -> ``[num_owned, F]``.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, track_running_stats: bool = True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.track_running_stats = track_running_stats
        self.weight = nn.Parameter(torch.ones(num_features)) if affine else None
        self.bias = nn.Parameter(torch.zeros(num_features)) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features))
            self.register_buffer("running_var", torch.ones(num_features))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def reset_parameters(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1.0)
            self.num_batches_tracked.zero_()
        if self.weight is not None:
            nn.init.ones_(self.weight)
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor, graph: RankGraph) -> torch.Tensor:
        if self.training or not self.track_running_stats:
            mean, var, count = global_moments(x, graph.comm, self.running_mean)
            if self.training and self.track_running_stats:
                with torch.no_grad():
                    unbiased = var * (count / (count - 1).clamp(min=1.0))
                    self.running_mean.mul_(1 - self.momentum).add_(
                        self.momentum * mean.to(self.running_mean.dtype))
                    self.running_var.mul_(1 - self.momentum).add_(
                        self.momentum * unbiased.to(self.running_var.dtype))
                    self.num_batches_tracked.add_(1)
            mean, var = mean.to(x.dtype), var.to(x.dtype)
        else:
            mean, var = self.running_mean, self.running_var
        out = (x - mean) * torch.rsqrt(var + self.eps)
        if self.weight is not None:
            out = out * self.weight + self.bias
        return out

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class LayerNorm(nn.Module):
    r"""Layer normalisation of Ba et al., "Layer Normalization" (2016), as PyG's ``LayerNorm``.

    ``mode="node"``: each node's row is normalised over its features (``torch.nn.LayerNorm``;
    no communication). ``mode="graph"`` (PyG's default): the whole graph is one sample,

    .. math:: x' = \frac{x - \mu}{\sigma + \epsilon} \odot \gamma + \beta

    with :math:`\mu, \sigma` the mean and biased standard deviation over all nodes of all ranks
    and all features (one allreduce per call, in eval mode too).

    Args:
        num_features: feature width F.
        eps: stabiliser (default 1e-5).
        affine: learnable per-feature :math:`\gamma, \beta` (default True).
        mode: ``"node"`` (default) or ``"graph"``.

    Shapes: x ``[num_owned, F]`` -> ``[num_owned, F]``.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True,
                 mode: str = "node"):
        super().__init__()
        if mode not in ("node", "graph"):
            raise ValueError(f"unknown layer-norm mode {mode!r}; choose 'node' or 'graph'")
        self.num_features, self.eps, self.mode = num_features, eps, mode
        self.weight = nn.Parameter(torch.ones(num_features)) if affine else None
        self.bias = nn.Parameter(torch.zeros(num_features)) if affine else None

    def reset_parameters(self) -> None:
        if self.weight is not None:
            nn.init.ones_(self.weight)
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor, graph: RankGraph) -> torch.Tensor:
        if self.mode == "node":
            return F.layer_norm(x, (self.num_features,), self.weight, self.bias, self.eps)
        mean, var, _ = global_moments(x, graph.comm, dim=(0, 1))
        out = (x - mean.to(x.dtype)) / (var.sqrt().to(x.dtype) + self.eps)
        if self.weight is not None:
            out = out * self.weight + self.bias
        return out

    def extra_repr(self) -> str:
        return f"{self.num_features}, mode={self.mode!r}"


NORMS = ("batch", "layer", "layer-graph")


def make_norm(name: str | None, num_features: int) -> nn.Module | None:
    """``"batch"`` -> :class:`DistributedBatchNorm`, ``"layer"`` -> node-wise :class:`LayerNorm`,
    ``"layer-graph"`` -> graph-mode :class:`LayerNorm`; ``None``/``"none"`` -> None."""
    if name in (None, "none"):
        return None
    if name == "batch":
        return DistributedBatchNorm(num_features)
    if name == "layer":
        return LayerNorm(num_features, mode="node")
    if name == "layer-graph":
        return LayerNorm(num_features, mode="graph")
    raise ValueError(f"unknown norm {name!r}; choose one of none, {', '.join(NORMS)}")
