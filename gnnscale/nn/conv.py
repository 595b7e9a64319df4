"""Distributed graph convolutions. Each takes this rank's rows and its graph
(:class:`~gnnscale.graph.RankGraph`).

Parameters are laid out as in PyG (``lin.weight`` + ``bias`` for GCN; ``lin_l`` with bias and
``lin_r`` without for SAGE), so weights move between gnnscale and PyG one-to-one.

Both layers are linear in the aggregation (SAGE's max aggregator excepted), so they may
transform before aggregating: with ``order="auto"`` a layer aggregates the narrower of its input
and output widths, which also makes the halo exchange send the narrower rows (as DGL's GraphConv
chooses by width). At equal widths it transforms first: the work and the exchanged rows are the
same either way, but aggregating first keeps the aggregate ``[num_owned, F]`` (SAGE: the
stacked ``[aggregate | x]``, twice that) for the weight gradient, while transforming first
needs only the layer's input, which the previous activation already keeps.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ..graph import RankGraph
from .edge_ops import inner_first_edges, local_edges, scatter_max
from .fused_transform import PendingLinear, can_fuse, relu_dropout_linear
from .stacked_rows import stacked_rows
from .tall_linear import can_use as can_use_linear_sum

ORDERS = ("auto", "aggregate_first", "transform_first")
SAGE_AGGRS = ("mean", "sum", "max")


def _transform_first(order: str, in_dim: int, out_dim: int) -> bool:
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; choose one of {', '.join(ORDERS)}")
    if order == "auto":
        return out_dim <= in_dim
    return order == "transform_first"


def aggregate_rows(graph: RankGraph, x: torch.Tensor, kind: str, rows: torch.Tensor | None,
                   columns: torch.Tensor | None = None) -> torch.Tensor:
    """``graph.aggregate(x, kind)``, or only its rows ``rows`` where given (``x`` holding
    owned rows ``columns`` only, where given: :meth:`RankGraph.aggregate_rows`)."""
    if rows is None:
        return graph.aggregate(x, kind)
    return graph.aggregate_rows(x, kind, rows, columns)


def _select(x: torch.Tensor, rows: torch.Tensor | None, columns: torch.Tensor | None = None,
            graph: RankGraph | None = None) -> torch.Tensor:
    """Owned rows ``rows`` of ``x``, which holds every owned row or (sorted) ``columns``
    (their positions there from ``graph``)."""
    if rows is None:
        return x
    return x.index_select(0, rows if columns is None else graph.positions_in(rows, columns))


class GCNLayer(nn.Module):
    r"""Graph convolution of Kipf & Welling, "Semi-Supervised Classification with Graph
    Convolutional Networks" (ICLR 2017):

    .. math:: X' = \hat D^{-1/2} (A + I) \hat D^{-1/2} X W + b

    with :math:`\hat D` the in-degree including the self-loop, taken from the whole graph.

    Args:
        in_dim: input width F_in.
        out_dim: output width F_out.
        bias: add a learnable bias (default True).
        order: ``"auto"`` (default), ``"aggregate_first"`` or ``"transform_first"``.

    Shapes: x ``[num_owned, F_in]`` -> ``[num_owned, F_out]``.
    """

    def __init__(self, in_dim: int, out_dim: int, bias: bool = True, order: str = "auto"):
        super().__init__()
        self.in_dim, self.out_dim = in_dim, out_dim
        self.transform_first = _transform_first(order, in_dim, out_dim)
        self.lin = nn.Linear(in_dim, out_dim, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_dim)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform weight, zero bias (PyG's GCNConv initialisation)."""
        bound = math.sqrt(6.0 / (self.in_dim + self.out_dim))
        nn.init.uniform_(self.lin.weight, -bound, bound)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    #: under bf16 autocast the model hands this layer bf16 rows: its aggregation reads them at
    #: half width and sums in float32, and its transform would round them to bf16 anyway
    takes_half_rows = True

    #: ``forward``/``forward_unbiased``/``forward_activated`` take ``rows``: only those output
    #: rows are computed
    takes_output_rows = True
    #: ... and ``columns``: an input holding only the owned rows the output rows read
    takes_input_rows = True

    def forward(self, x: torch.Tensor, graph: RankGraph, rows: torch.Tensor | None = None,
                columns: torch.Tensor | None = None) -> torch.Tensor:
        """``rows`` (int64 owned rows, or None for all): the output's rows to compute, e.g.
        the loss's in training (their aggregation reads only their edges). ``columns``: ``x``
        holds only these owned rows (sorted; from ``graph.rows_read_by(rows)``)."""
        if not self.transform_first:  # the bias rides in the GEMM (addmm)
            return F.linear(aggregate_rows(graph, x, "gcn", rows, columns), self.lin.weight,
                            self.bias)
        out = aggregate_rows(graph, self.lin(x), "gcn", rows, columns)
        return out + self.bias if self.bias is not None else out

    def forward_unbiased(self, x: torch.Tensor, graph: RankGraph,
                         rows: torch.Tensor | None = None,
                         columns: torch.Tensor | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(forward(x) - bias, bias)``: the output without its bias, for a caller that adds
        the bias in a pass of its own (:meth:`forward_activated` of the next layer). Where the
        layer aggregates first onto float32 CPU rows the output is a
        :class:`~gnnscale.nn.fused_transform.PendingLinear` that pass forms itself. ``rows``
        and ``columns`` as for :meth:`forward`."""
        if not self.transform_first:
            aggregate = aggregate_rows(graph, x, "gcn", rows, columns)
            pending = PendingLinear([aggregate], [self.lin.weight])
            if can_fuse(pending):
                return pending, self.bias
            if can_use_linear_sum(aggregate):
                return pending.materialize(), self.bias
            return F.linear(aggregate, self.lin.weight), self.bias
        return aggregate_rows(graph, self.lin(x), "gcn", rows, columns), self.bias

    def forward_activated(self, h: torch.Tensor, p: float, training: bool, graph: RankGraph,
                          bias: torch.Tensor | None = None, rows: torch.Tensor | None = None,
                          columns: torch.Tensor | None = None) -> torch.Tensor | None:
        """This layer on ``relu_dropout(h + bias, p, training)`` with the activation never
        formed (:func:`~gnnscale.nn.fused_transform.relu_dropout_linear`; ``bias`` is the
        previous layer's, deferred by its :meth:`forward_unbiased`), where the layer transforms
        first and ``h`` is float32 on the CPU; else None. ``rows`` and ``columns`` as for
        :meth:`forward`."""
        if not self.transform_first or not can_fuse(h):
            return None
        out = aggregate_rows(graph, relu_dropout_linear(h, self.lin.weight, p, training, bias),
                             "gcn", rows, columns)
        return out + self.bias if self.bias is not None else out

    def extra_repr(self) -> str:
        return f"{self.in_dim}, {self.out_dim}, transform_first={self.transform_first}"


class SAGELayer(nn.Module):
    r"""GraphSAGE layer of Hamilton et al., "Inductive Representation Learning on Large Graphs"
    (NeurIPS 2017), with the mean (default), sum or max aggregator:

    .. math:: x'_v = W_l \cdot \mathrm{aggr}_{u \in N(v)} x_u + b + W_r x_v

    Nodes without in-neighbours aggregate to zero (as PyG's ``SAGEConv(aggr=...)``, which this
    equals with the same weights). The max aggregator is the paper's pooling aggregator without
    its pre-transform (PyG's ``SAGEConv(aggr="max")``, ``project=False``); it is not linear, so
    it always aggregates first, over ``[owned; halo]`` rows fetched with the halo exchange.

    Args:
        in_dim: input width F_in.
        out_dim: output width F_out.
        bias: bias of the neighbour transform (default True).
        order: ``"auto"`` (default), ``"aggregate_first"`` or ``"transform_first"`` (mean and
            sum only; max always aggregates first).
        aggr: ``"mean"`` (default), ``"sum"`` or ``"max"``.

    Shapes: x ``[num_owned, F_in]`` -> ``[num_owned, F_out]``.
    """

    def __init__(self, in_dim: int, out_dim: int, bias: bool = True, order: str = "auto",
                 aggr: str = "mean"):
        super().__init__()
        if aggr not in SAGE_AGGRS:
            raise ValueError(f"unknown SAGE aggregator {aggr!r}; choose one of "
                             f"{', '.join(SAGE_AGGRS)}")
        self.in_dim, self.out_dim, self.aggr = in_dim, out_dim, aggr
        self.transform_first = _transform_first(order, in_dim, out_dim) and aggr != "max"
        self.lin_l = nn.Linear(in_dim, out_dim, bias=bias)
        self.lin_r = nn.Linear(in_dim, out_dim, bias=False)

    def reset_parameters(self) -> None:
        self.lin_l.reset_parameters()
        self.lin_r.reset_parameters()

    @property
    def takes_half_rows(self) -> bool:
        """As :attr:`GCNLayer.takes_half_rows`, for the mean and sum aggregators (max gathers
        rows with torch's index operations)."""
        return self.aggr != "max"

    #: as :attr:`GCNLayer.takes_output_rows`
    takes_output_rows = True

    @property
    def takes_input_rows(self) -> bool:
        """As :attr:`GCNLayer.takes_input_rows`, for the mean and sum aggregators (max
        gathers every owned row)."""
        return self.aggr != "max"

    def forward(self, x: torch.Tensor, graph: RankGraph, rows: torch.Tensor | None = None,
                columns: torch.Tensor | None = None) -> torch.Tensor:
        """``rows`` and ``columns`` as for :meth:`GCNLayer.forward` (max aggregates every row
        and selects; it takes no ``columns``)."""
        if self.aggr == "max":
            if columns is not None:
                raise ValueError("SAGE with the max aggregator reads every owned row: it "
                                 "takes no columns")
            return _select(self._forward_max(x, graph), rows)
        if self.transform_first:
            # two GEMMs rather than one into [N, 2 F_out]: slicing that would take a copy
            # forward and two zero-filled [N, 2 F_out] gradients backward; the bias rides in
            # the root transform
            neigh = aggregate_rows(graph, F.linear(x, self.lin_l.weight), self.aggr, rows,
                                   columns)
            return neigh + F.linear(_select(x, rows, columns, graph), self.lin_r.weight,
                                    self.lin_l.bias)
        # aggregate @ W_l^T + b, then x @ W_r^T added into it in place: no [N, 2 F_in] copy of
        # [aggregate | x] kept for backward, no gradient of it split backward; autograd keeps
        # the aggregate (x is kept by whatever produced it)
        neigh = aggregate_rows(graph, x, self.aggr, rows, columns)
        out = F.linear(neigh, self.lin_l.weight, self.lin_l.bias)
        # in-place ops are not autocast: the root product takes the output's dtype itself
        return out.addmm_(_select(x, rows, columns, graph).to(out.dtype),
                          self.lin_r.weight.t().to(out.dtype))

    def forward_unbiased(self, x: torch.Tensor, graph: RankGraph,
                         rows: torch.Tensor | None = None,
                         columns: torch.Tensor | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """As :meth:`GCNLayer.forward_unbiased` (the bias is ``lin_l``'s; aggregating first, the
        pending product is of the aggregate and ``x``)."""
        bias = self.lin_l.bias
        if self.aggr == "max" or bias is None:
            return self(x, graph, rows, columns), None
        if self.transform_first:
            neigh = aggregate_rows(graph, F.linear(x, self.lin_l.weight), self.aggr, rows,
                                   columns)
            # not in place: under no_grad the aggregate may be the graph's kept copy
            return neigh + F.linear(_select(x, rows, columns, graph), self.lin_r.weight), bias
        weights = [self.lin_l.weight, self.lin_r.weight]
        if rows is not None and columns is None and not x.requires_grad:
            # the rows gathered side by side: one product of depth 2 F_in (stacked_rows.py),
            # decided before gathering (x stands in for the stacked rows: the same dtype,
            # device and rank), so a pass that cannot take it gathers nothing
            stacked_weight = torch.cat(weights, dim=1)
            if can_fuse(PendingLinear([x], [stacked_weight])):
                return PendingLinear([stacked_rows(graph.aggregate(x, self.aggr), x, rows)],
                                     [stacked_weight]), bias
        neigh = aggregate_rows(graph, x, self.aggr, rows, columns)
        root = _select(x, rows, columns, graph)
        pending = PendingLinear([neigh, root], weights)
        if can_fuse(pending):
            return pending, bias
        if can_use_linear_sum(neigh) and root.dtype == neigh.dtype:
            return pending.materialize(), bias
        out = F.linear(neigh, self.lin_l.weight)
        return out.addmm_(root.to(out.dtype), self.lin_r.weight.t().to(out.dtype)), bias

    def forward_activated(self, h: torch.Tensor, p: float, training: bool, graph: RankGraph,
                          bias: torch.Tensor | None = None, rows: torch.Tensor | None = None,
                          columns: torch.Tensor | None = None) -> torch.Tensor | None:
        """As :meth:`GCNLayer.forward_activated`: both transforms in one product with the
        weights stacked, where the layer transforms first (mean and sum); else None."""
        if not self.transform_first or not can_fuse(h):
            return None
        weights = torch.cat([self.lin_l.weight, self.lin_r.weight])
        both = relu_dropout_linear(h, weights, p, training, bias)
        neigh = aggregate_rows(graph, both[:, :self.out_dim].contiguous(), self.aggr, rows,
                               columns)
        root = _select(both, rows, columns, graph)[:, self.out_dim:]
        return neigh + (root + self.lin_l.bias if self.lin_l.bias is not None else root)

    def _forward_max(self, x: torch.Tensor, graph: RankGraph) -> torch.Tensor:
        """Max over ``[owned; halo]`` rows. The halo exchange is posted first and overlaps the
        root transform and the gathering of owned source rows; one scatter-max over all edges
        afterwards (so ties share the gradient exactly as in PyG)."""
        finish = graph.halo_async(x)
        if finish is None:  # nothing to overlap: fetch the halo, then gather
            src, dst = local_edges(graph)
            rows = graph.gather_with_halo(x).index_select(0, src)
            root = self.lin_r(x)
        else:
            inner_src, halo_src, dst = inner_first_edges(graph)
            root = self.lin_r(x)  # while the halo travels
            rows = torch.cat([x.index_select(0, inner_src),
                              finish().index_select(0, halo_src)])
        return self.lin_l(scatter_max(rows, dst, graph.num_owned)) + root

    def extra_repr(self) -> str:
        return (f"{self.in_dim}, {self.out_dim}, aggr={self.aggr!r}, "
                f"transform_first={self.transform_first}")
