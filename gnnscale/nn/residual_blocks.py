r"""Residual GNN blocks of Platonov et al., "A critical look at the evaluation of GNNs under
heterophily: are we really making progress?" (ICLR 2023), distributed.

Their model (``model.py``/``modules.py`` of yandex-research/heterophilous-graphs) is

.. math::
    h_0 = \mathrm{GELU}(\mathrm{drop}(W_{in} x + b_{in})), \qquad
    h_{l+1} = h_l + \mathrm{module}_l(\mathrm{norm}_l(h_l)), \qquad
    \mathrm{logits} = W_{out}\, \mathrm{norm}_{out}(h_L) + b_{out}

where a module is a graph operation followed by a feed-forward network
:math:`\mathrm{FF}(z) = \mathrm{drop}(W_2\, \mathrm{GELU}(\mathrm{drop}(W_1 z + b_1)) + b_2)`:

- ``gcn``: :math:`\mathrm{FF}(\hat D^{-1/2}(A+I)\hat D^{-1/2} h)` (no weight inside the
  propagation; the feed-forward network is the transform);
- ``sage``: :math:`\mathrm{FF}([h \,\Vert\, \mathrm{mean}_{u \in N(v)} h_u])`;
- ``gat``: :math:`\mathrm{FF}(\sum_{u \in N(v) \cup \{v\}} \alpha^k_{vu} (W h_u + b))` with
  per-head scores :math:`\alpha^k = \mathrm{softmax}(\mathrm{LeakyReLU}_{0.2}(a_u^k \cdot
  (W h_u + b) + c^k + a_v^k \cdot (W h_v + b)))` and the heads interleaved as in their code
  (feature ``i`` belongs to head ``i mod H``); no dropout on the attention.

Parameter names equal theirs (``input_linear``, ``residual_modules.{i}.normalization``,
``residual_modules.{i}.module.feed_forward_module.linear_1``, ...), so a state dict moves
between the two one-to-one. Aggregation statistics (degrees) come from the whole graph and every
rank holds the in-edges of its owned nodes, so the result equals one process on the whole graph.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..graph import LocalGraph
from .dropout import dropout as fast_dropout
from .edge_ops import edge_softmax, local_edges_with_self_loops, weighted_sum
from .norms import make_norm

RESIDUAL_BLOCKS = ("gcn", "sage", "gat")


class FeedForward(nn.Module):
    r"""Their ``FeedForwardModule``: ``drop(linear_2(GELU(drop(linear_1(x)))))``.

    Args:
        dim: output width (and, times ``input_dim_multiplier``, the input width).
        hidden_dim_multiplier: hidden width is ``int(dim * hidden_dim_multiplier)`` (default 1).
        dropout: dropout after each linear map (default 0).
        input_dim_multiplier: input width is ``int(dim * input_dim_multiplier)`` (default 1).

    Shapes: ``[N, dim * input_dim_multiplier]`` -> ``[N, dim]``.
    """

    def __init__(self, dim: int, hidden_dim_multiplier: float = 1.0, dropout: float = 0.0,
                 input_dim_multiplier: float = 1.0):
        super().__init__()
        hidden = int(dim * hidden_dim_multiplier)
        self.linear_1 = nn.Linear(int(dim * input_dim_multiplier), hidden)
        self.linear_2 = nn.Linear(hidden, dim)
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.gelu(fast_dropout(self.linear_1(x), self.dropout, self.training))
        return fast_dropout(self.linear_2(x), self.dropout, self.training)


class GCNModule(nn.Module):
    r"""Their ``GCNModule``: symmetric-normalised propagation with self-loops, then
    :class:`FeedForward`. Shapes: ``[num_owned, dim]`` -> ``[num_owned, dim]``."""

    def __init__(self, dim: int, hidden_dim_multiplier: float = 1.0, dropout: float = 0.0,
                 **_unused):
        super().__init__()
        self.feed_forward_module = FeedForward(dim, hidden_dim_multiplier, dropout)

    def forward(self, x: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
        return self.feed_forward_module(graph.aggregate(x, "gcn"))


class SAGEModule(nn.Module):
    r"""Their ``SAGEModule``: ``FF([x, mean of in-neighbours])`` (no self-loop; a node without
    in-neighbours aggregates to zero). Shapes: ``[num_owned, dim]`` -> ``[num_owned, dim]``."""

    def __init__(self, dim: int, hidden_dim_multiplier: float = 1.0, dropout: float = 0.0,
                 **_unused):
        super().__init__()
        self.feed_forward_module = FeedForward(dim, hidden_dim_multiplier, dropout,
                                               input_dim_multiplier=2)

    def forward(self, x: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
        return self.feed_forward_module(torch.cat([x, graph.aggregate(x, "mean")], dim=1))


class GATModule(nn.Module):
    r"""Their ``GATModule``: a linear map, multi-head attention over in-edges plus one self-loop
    per node, then :class:`FeedForward`. The source terms travel with the transformed rows in one
    halo exchange; each destination's softmax and sum are local to its rank.

    Args:
        dim: width (a multiple of ``num_heads``).
        hidden_dim_multiplier, dropout: of the feed-forward network.
        num_heads: attention heads H (default 8); head ``k`` uses features ``k, k + H, ...``.

    Shapes: ``[num_owned, dim]`` -> ``[num_owned, dim]``.
    """

    def __init__(self, dim: int, hidden_dim_multiplier: float = 1.0, dropout: float = 0.0,
                 num_heads: int = 8, **_unused):
        super().__init__()
        if dim % num_heads != 0:
            raise ValueError(f"hidden width {dim} must be a multiple of the number of heads "
                             f"{num_heads}")
        self.dim, self.num_heads = dim, num_heads
        self.input_linear = nn.Linear(dim, dim)
        self.attn_linear_u = nn.Linear(dim, num_heads)
        self.attn_linear_v = nn.Linear(dim, num_heads, bias=False)
        self.feed_forward_module = FeedForward(dim, hidden_dim_multiplier, dropout)

    def forward(self, x: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
        x = self.input_linear(x)
        both = graph.gather_with_halo(torch.cat([x, self.attn_linear_u(x)], dim=1))
        values, score_src = both[:, :self.dim], both[:, self.dim:]
        src, dst = local_edges_with_self_loops(graph)
        scores = score_src.index_select(0, src) + self.attn_linear_v(x).index_select(0, dst)
        alpha = edge_softmax(F.leaky_relu(scores, 0.2), dst, graph.num_owned)
        heads = values.reshape(-1, self.dim // self.num_heads, self.num_heads)
        out = weighted_sum(heads, alpha.unsqueeze(1), src, dst, graph.num_owned)
        return self.feed_forward_module(out.reshape(-1, self.dim))


MODULES = {"gcn": GCNModule, "sage": SAGEModule, "gat": GATModule}


class ResidualModule(nn.Module):
    """Their ``ResidualModuleWrapper``: ``x + module(norm(x), graph)``."""

    def __init__(self, module: nn.Module, norm: str | None, dim: int):
        super().__init__()
        self.normalization = make_norm(norm, dim) or nn.Identity()
        self.module = module

    def forward(self, x: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
        h = x if isinstance(self.normalization, nn.Identity) else self.normalization(x, graph)
        return x + self.module(h, graph)


class ResidualGNN(nn.Module):
    r"""Platonov et al.'s model: input linear map, ``num_layers`` residual blocks of ``block``,
    output norm and linear map (formula in :mod:`gnnscale.nn.residual_blocks`).

    Args:
        block: ``"gcn"``, ``"sage"`` or ``"gat"``.
        in_dim: input feature width.
        hidden_dim: width of the residual stream (their default 512).
        out_dim: number of classes.
        num_layers: residual blocks (their default 5).
        dropout: dropout probability (their default 0.2).
        norm: ``"layer"`` (node-wise layer norm, their default), ``"batch"`` (whole-graph
            statistics) or ``None``.
        num_heads: attention heads of ``gat`` blocks (default 8).
        hidden_dim_multiplier: feed-forward hidden width factor (default 1).
        single_logit: for two classes, one output logit ``z`` (their binary set-up, trained
            with BCE) returned as the two-column ``[0, z]``: cross-entropy on it equals
            BCE-with-logits on ``z``, and its class-1 softmax is ``sigmoid(z)`` (so ROC AUC is
            unchanged). Default True.

    Shapes: x ``[num_owned, in_dim]`` -> logits ``[num_owned, out_dim]``.
    """

    def __init__(self, block: str, in_dim: int, hidden_dim: int, out_dim: int,
                 num_layers: int = 5, dropout: float = 0.2, norm: str | None = "layer", *,
                 num_heads: int = 8, hidden_dim_multiplier: float = 1.0,
                 single_logit: bool = True):
        super().__init__()
        if block not in MODULES:
            raise ValueError(f"unknown residual block {block!r}; choose one of "
                             f"{', '.join(RESIDUAL_BLOCKS)}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.dropout = dropout
        self.single_logit = single_logit and out_dim == 2
        self.input_linear = nn.Linear(in_dim, hidden_dim)
        self.residual_modules = nn.ModuleList(
            ResidualModule(MODULES[block](hidden_dim, hidden_dim_multiplier, dropout,
                                          num_heads=num_heads), norm, hidden_dim)
            for _ in range(num_layers))
        self.output_normalization = make_norm(norm, hidden_dim) or nn.Identity()
        self.output_linear = nn.Linear(hidden_dim, 1 if self.single_logit else out_dim)

    def forward(self, x: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
        x = F.gelu(fast_dropout(self.input_linear(x), self.dropout, self.training))
        for block in self.residual_modules:
            x = block(x, graph)
        if not isinstance(self.output_normalization, nn.Identity):
            x = self.output_normalization(x, graph)
        logits = self.output_linear(x)
        if self.single_logit:
            return torch.cat([torch.zeros_like(logits), logits], dim=1)
        return logits
