"""Distributed graph attention (GAT): attention over halo edges is computed where the destination
lives.

Each rank transforms its owned rows, computes their source attention terms, and sends both in one
halo exchange; the destination's rank then scores, softmax-normalises and sums its in-edges
locally (every in-edge of an owned node is stored with it). Parameters are laid out as PyG's
``GATConv`` (``lin.weight``, ``att_src``, ``att_dst``, ``bias``), so weights move one-to-one.

The exchange is posted before the in-edges from owned sources are scored, softmax-summed and
aggregated; the halo's edges follow once it arrives, and the two parts are combined by
rescaling each to their common maximum (the online softmax), so the result is the softmax over
all of a node's in-edges. Backward mirrors it: the halo gradients go back to their owners while
the owned sources' part runs backward.

The weighted sum of the source rows is formed a chunk of edges at a time
(:func:`~gnnscale.nn.edge_ops.weighted_sum`): a GAT layer keeps two floats per edge and head
for backward (its scores and their softmax numerators), never an ``[edges, heads, width]``
message tensor. GATv2's scores themselves need each edge's source row, which it keeps, as PyG.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ..graph import RankGraph
from .dropout import dropout as fast_dropout
from .edge_ops import (inner_first_edges, local_edges, local_edges_with_self_loops,
                       scatter_max_or_minus_inf, scatter_sum, weighted_sum)


class GATLayer(nn.Module):
    r"""Graph attention layer of Veličković et al., "Graph Attention Networks" (ICLR 2018):

    .. math::
        x'_i = \big\Vert_{k=1}^{H} \sum_{j \in N(i) \cup \{i\}} \alpha^k_{ij} W^k x_j + b,
        \qquad
        \alpha^k_{ij} = \mathrm{softmax}_j\Big(\mathrm{LeakyReLU}\big(
            a^{k\top}_{src} W^k x_j + a^{k\top}_{dst} W^k x_i\big)\Big)

    with the heads concatenated (``concat=True``) or averaged (``concat=False``, as the paper's
    output layer). Existing self-loops are removed and one per node is added, as PyG's
    ``GATConv`` does by default; with the same weights this layer equals
    ``GATConv(in_dim, out_dim, heads, concat, negative_slope, dropout)`` on the whole graph.

    Args:
        in_dim: input width F_in.
        out_dim: width per head C.
        heads: number of attention heads H (default 1).
        concat: concatenate the heads (default True) or average them.
        negative_slope: LeakyReLU slope of the attention scores (default 0.2).
        dropout: dropout probability on the attention coefficients while training (default 0;
            the mask comes from the rank's seeded generator, see :mod:`gnnscale.nn.dropout`).
        add_self_loops: replace self-loops by one per node (default True).
        bias: add a learnable bias (default True).
        value_dropout: dropout probability, while training, on the transformed features a node
            sends as its message, not on those its attention terms come from (default 0; the
            reference GAT code drops them, ``seq_fts`` in its ``attn_head``).

    Shapes: x ``[num_owned, F_in]`` -> ``[num_owned, H * C]`` (concat) or ``[num_owned, C]``.
    """

    def __init__(self, in_dim: int, out_dim: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0,
                 add_self_loops: bool = True, bias: bool = True, value_dropout: float = 0.0):
        super().__init__()
        self._set_options(in_dim, out_dim, heads, concat, negative_slope, dropout,
                          add_self_loops, value_dropout)
        self.lin = nn.Linear(in_dim, heads * out_dim, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_dim))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_dim))
        self.bias = nn.Parameter(torch.empty(self.output_dim)) if bias else None
        self.reset_parameters()

    def _set_options(self, in_dim: int, out_dim: int, heads: int, concat: bool,
                     negative_slope: float, dropout: float, add_self_loops: bool,
                     value_dropout: float) -> None:
        """Check and keep the options both attention layers share."""
        if heads < 1:
            raise ValueError(f"heads must be at least 1, got {heads}")
        for name, p in (("attention", dropout), ("value", value_dropout)):
            if not 0.0 <= p < 1.0:
                raise ValueError(f"{name} dropout must be in [0, 1), got {p}")
        self.in_dim, self.out_dim, self.heads, self.concat = in_dim, out_dim, heads, concat
        self.negative_slope, self.dropout = negative_slope, dropout
        self.value_dropout = value_dropout
        self.add_self_loops = add_self_loops

    @property
    def output_dim(self) -> int:
        """Width of the output rows: ``heads * out_dim`` if concatenating, else ``out_dim``."""
        return self.heads * self.out_dim if self.concat else self.out_dim

    def reset_parameters(self) -> None:
        """Glorot-uniform weights and attention vectors, zero bias (as PyG's GATConv)."""
        _glorot_and_zeros((self.lin.weight, self.att_src, self.att_dst), (self.bias,))

    def forward(self, x: torch.Tensor, graph: RankGraph) -> torch.Tensor:
        heads, width = self.heads, self.out_dim
        h = self.lin(x).view(-1, heads, width)
        score_src = (h * self.att_src).sum(dim=-1)
        score_dst = (h * self.att_dst).sum(dim=-1)
        values = fast_dropout(h, self.value_dropout, self.training)
        # One exchange carries both what a source contributes and its attention term.
        rows = torch.cat([values.reshape(-1, heads * width), score_src], dim=1)
        return self._attention(rows, score_dst, graph)

    def _edge_scores(self, values: torch.Tensor, src: torch.Tensor, src_terms: torch.Tensor,
                     dst_terms: torch.Tensor) -> torch.Tensor:
        """Scores [E, H] of edges from their sources' attention terms [E, H] and their
        destinations' (the source rows' values [R, H, C] and indices ``src`` are there for
        :class:`GATv2Layer`): ``LeakyReLU(a_src . W x_j + a_dst . W x_i)``."""
        return F.leaky_relu(src_terms + dst_terms, self.negative_slope)

    def _attention(self, rows: torch.Tensor, dst_terms: torch.Tensor,
                   graph: RankGraph) -> torch.Tensor:
        """Attention over every owned node's in-edges, given each owned node's exchanged row
        (its values [H * C] first) and its destination term; bias added."""
        finish = graph.halo_async(rows)
        n = graph.num_owned
        if finish is None:  # one rank, or halos from a staleness policy: every edge at once
            src, dst = (local_edges_with_self_loops(graph) if self.add_self_loops
                        else local_edges(graph))
            parts = [self._attend(graph.gather_with_halo(rows), src, dst_terms, dst, n)]
        else:  # the edges from owned sources while the halo travels, then the halo's
            inner_src, halo_src, dst = inner_first_edges(graph, self.add_self_loops)
            k = inner_src.numel()
            parts = [self._attend(rows, inner_src, dst_terms, dst[:k], n)]
            parts.append(self._attend(finish(), halo_src, dst_terms, dst[k:], n))
        out = _combine(parts)
        out = out.reshape(-1, self.heads * self.out_dim) if self.concat else out.mean(dim=1)
        return out + self.bias if self.bias is not None else out

    def _attend(self, rows: torch.Tensor, src: torch.Tensor, dst_terms: torch.Tensor,
                dst: torch.Tensor, n: int) -> tuple[torch.Tensor, ...]:
        """Softmax attention over one part of every destination's in-edges (sources ``src``
        into ``rows``), relative to that part's own maximum.

        Returns ``(top, total, summed)``: per destination and head the part's maximum score
        (``-inf`` without edges; no gradient), the sum of ``exp(score - top)`` and the sum of
        the attention-dropped ``exp(score - top)`` times the source values.
        """
        heads, width = self.heads, self.out_dim
        values = rows[:, :heads * width].view(-1, heads, width)  # per source row, not per edge
        src_terms = rows[:, heads * width:].index_select(0, src)
        scores = self._edge_scores(values, src, src_terms, dst_terms.index_select(0, dst))
        top = scatter_max_or_minus_inf(scores, dst, n)  # finite wherever an edge arrives
        weights = (scores - top.index_select(0, dst)).exp()
        kept = fast_dropout(weights, self.dropout, self.training)
        # the messages kept * values are formed a chunk of edges at a time, never all at once
        summed = weighted_sum(values, kept.unsqueeze(-1), src, dst, n)
        return top, scatter_sum(weights, dst, n), summed

    def extra_repr(self) -> str:
        return f"{self.in_dim}, {self.out_dim}, heads={self.heads}, concat={self.concat}"


class GATv2Layer(GATLayer):
    r"""Graph attention with dynamic attention, Brody et al., "How Attentive are Graph
    Attention Networks?" (ICLR 2022):

    .. math::
        x'_i = \big\Vert_{k=1}^{H} \sum_{j \in N(i) \cup \{i\}} \alpha^k_{ij} W^k_l x_j + b,
        \qquad
        \alpha^k_{ij} = \mathrm{softmax}_j\Big(a^{k\top} \mathrm{LeakyReLU}\big(
            W^k_l x_j + W^k_r x_i\big)\Big)

    Laid out as PyG's ``GATv2Conv`` (``lin_l``, ``lin_r`` with biases, ``att``, ``bias``;
    ``share_weights=False``), which it equals with the same weights on the whole graph. The
    halo exchange carries the sources' ``W_l x_j`` rows (values and score terms at once) and
    overlaps the owned sources' edges as in :class:`GATLayer`.

    Args: as :class:`GATLayer` (no ``value_dropout``).
    """

    def __init__(self, in_dim: int, out_dim: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0,
                 add_self_loops: bool = True, bias: bool = True):
        nn.Module.__init__(self)
        self._set_options(in_dim, out_dim, heads, concat, negative_slope, dropout,
                          add_self_loops, 0.0)
        self.lin_l = nn.Linear(in_dim, heads * out_dim, bias=bias)
        self.lin_r = nn.Linear(in_dim, heads * out_dim, bias=bias)
        self.att = nn.Parameter(torch.empty(1, heads, out_dim))
        self.bias = nn.Parameter(torch.empty(self.output_dim)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform weights and attention vector, zero biases (as PyG's GATv2Conv)."""
        _glorot_and_zeros((self.lin_l.weight, self.lin_r.weight, self.att),
                          (self.lin_l.bias, self.lin_r.bias, self.bias))

    def forward(self, x: torch.Tensor, graph: RankGraph) -> torch.Tensor:
        targets = self.lin_r(x).view(-1, self.heads, self.out_dim)
        return self._attention(self.lin_l(x), targets, graph)

    def _edge_scores(self, values: torch.Tensor, src: torch.Tensor, src_terms: torch.Tensor,
                     dst_terms: torch.Tensor) -> torch.Tensor:
        """``a . LeakyReLU(W_l x_j + W_r x_i)`` per edge and head (the values are
        ``W_l x_j``; the sources send no separate terms). Unlike GAT's, these scores need
        every edge's ``[H, C]`` source row, kept for backward as in PyG's ``GATv2Conv``."""
        gathered = values.index_select(0, src)
        return (F.leaky_relu(gathered + dst_terms, self.negative_slope) * self.att).sum(dim=-1)


def _glorot_and_zeros(weights, biases) -> None:
    """Glorot-uniform ``weights`` (over their last two dimensions), zero ``biases`` (None
    skipped)."""
    for tensor in weights:
        bound = math.sqrt(6.0 / (tensor.size(-2) + tensor.size(-1)))
        nn.init.uniform_(tensor, -bound, bound)
    for bias in biases:
        if bias is not None:
            nn.init.zeros_(bias)


def _combine(parts: list) -> torch.Tensor:
    r"""The attention output from :meth:`GATLayer._attend`'s parts of each destination's
    in-edges: each part rescaled to the maximum over all parts ``m``,

    .. math:: x'_i = \frac{\sum_p e^{t_p - m} S_p}{\sum_p e^{t_p - m} Z_p + 10^{-16}},

    which is PyG's ``softmax`` (maximum subtracted, ``1e-16`` added to the sum) followed by
    the weighted sum, up to rounding. One part: ``S / (Z + 1e-16)``."""
    if len(parts) == 1:
        _, total, summed = parts[0]
        return summed / (total + 1e-16).unsqueeze(-1)
    top = torch.stack([p[0] for p in parts]).amax(dim=0)
    top = top.masked_fill(torch.isinf(top), 0.0)  # nodes without in-edges: any finite value
    total, summed = 0.0, 0.0
    for part_top, part_total, part_summed in parts:
        scale = (part_top - top).exp()  # 0 for a part without edges into the node (-inf)
        total = total + part_total * scale
        summed = summed + part_summed * scale.unsqueeze(-1)
    return summed / (total + 1e-16).unsqueeze(-1)
