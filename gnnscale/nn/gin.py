"""Distributed graph isomorphism network layer (GIN)."""

from __future__ import annotations

import torch
from torch import nn

from ..graph import RankGraph
from .conv import _transform_first


class GINLayer(nn.Module):
    r"""Graph isomorphism layer of Xu et al., "How Powerful are Graph Neural Networks?"
    (ICLR 2019):

    .. math:: x'_i = h_\Theta\Big((1 + \epsilon) \, x_i + \sum_{j \in N(i)} x_j\Big)

    summing over every stored in-edge (self-loops and repeated edges included, as PyG's
    ``GINConv``, which this equals with ``nn=mlp`` and the same weights and ``eps``).

    The default MLP :math:`h_\Theta` is ``Linear(F_in, hidden) -> ReLU -> Linear(hidden,
    F_out)``. Its first linear map commutes with the sum, so with ``order="auto"`` a layer whose
    hidden width is at most F_in transforms first and exchanges the narrower rows; a custom
    ``mlp`` always aggregates first.

    Args:
        in_dim: input width F_in.
        out_dim: output width F_out.
        hidden_dim: hidden width of the default MLP (default: ``out_dim``).
        eps: initial :math:`\epsilon` (default 0).
        train_eps: learn :math:`\epsilon` (default False: a fixed buffer).
        mlp: a module mapping ``[N, F_in]`` to ``[N, F_out]`` instead of the default MLP
            (it sees only this rank's rows, so it must work row by row). Stored as ``nn``, as
            PyG's ``GINConv`` stores it, so state dicts move one-to-one.
        order: ``"auto"`` (default), ``"aggregate_first"`` or ``"transform_first"``.

    Shapes: x ``[num_owned, F_in]`` -> ``[num_owned, F_out]``.
    """

    def __init__(self, in_dim: int, out_dim: int, hidden_dim: int | None = None,
                 eps: float = 0.0, train_eps: bool = False, mlp: nn.Module | None = None,
                 order: str = "auto"):
        super().__init__()
        self.in_dim, self.out_dim, self.initial_eps = in_dim, out_dim, float(eps)
        hidden_dim = hidden_dim or out_dim
        self.default_mlp = mlp is None
        if mlp is None:
            mlp = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(),
                                nn.Linear(hidden_dim, out_dim))
        self.nn = mlp  # named as in PyG's GINConv, so state dicts match
        self.transform_first = (self.default_mlp
                                and _transform_first(order, in_dim, hidden_dim))
        if train_eps:
            self.eps = nn.Parameter(torch.tensor([float(eps)]))
        else:
            self.register_buffer("eps", torch.tensor([float(eps)]))

    def reset_parameters(self) -> None:
        """Re-initialise the MLP's layers and set eps back to its initial value."""
        for module in self.nn.modules():
            if module is not self.nn and hasattr(module, "reset_parameters"):
                module.reset_parameters()
        self.eps.data.fill_(self.initial_eps)

    def forward(self, x: torch.Tensor, graph: RankGraph) -> torch.Tensor:
        if self.transform_first:
            first = self.nn[0]
            xw = x @ first.weight.t()
            h = graph.aggregate(xw, "sum") + (1 + self.eps) * xw
            if first.bias is not None:
                h = h + first.bias
            return self.nn[1:](h)
        return self.nn(graph.aggregate(x, "sum") + (1 + self.eps) * x)

    def extra_repr(self) -> str:
        return (f"{self.in_dim}, {self.out_dim}, train_eps={isinstance(self.eps, nn.Parameter)}, "
                f"transform_first={self.transform_first}")
