"""Stacks of distributed graph layers for node classification.

Model names (``gnnscale train --model``):

- ``gcn``: :class:`GCNLayer` (PyG ``GCNConv``).
- ``sage``: :class:`SAGELayer`, mean aggregator (PyG ``SAGEConv``).
- ``sage-max``: :class:`SAGELayer`, max aggregator (PyG ``SAGEConv(aggr="max")``).
- ``gat``: :class:`GATLayer` (PyG ``GATConv``); hidden layers concatenate ``heads`` heads of
  ``hidden_dim`` features, the output layer averages ``out_heads`` heads (as the GAT paper).
- ``gin``: :class:`GINLayer` with a two-layer MLP (PyG ``GINConv``).
- ``gatv2``: :class:`GATv2Layer` (PyG ``GATv2Conv``), heads as ``gat``.
- ``graphconv``: PyG's ``GraphConv`` (sum aggregation) through :class:`DistributedConv`.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..graph import RankGraph
from .conv import GCNLayer, SAGELayer
from .dropout import dropout as fast_dropout
from .dropout import relu_dropout
from .fused_transform import PendingLinear, can_fuse
from .gat import GATLayer, GATv2Layer
from .gemm import cpu_autocast_dtype
from .gin import GINLayer
from .model_names import MODEL_NAMES
from .norms import NORMS, make_norm
from .pyg_wrapper import DistributedConv

ACTIVATIONS = {"relu": F.relu, "elu": F.elu, "gelu": F.gelu}


def build_layer(model: str, in_dim: int, out_dim: int, last: bool, *, order: str = "auto",
                heads: int = 8, out_heads: int = 1, attn_dropout: float = 0.0,
                train_eps: bool = False, eps: float = 0.0) -> tuple[nn.Module, int]:
    """One graph layer of ``model`` and its output width.

    For attention models ``out_dim`` is the width per head; hidden layers (``last=False``)
    concatenate ``heads`` heads (output width ``heads * out_dim``), the last layer averages
    ``out_heads`` heads (output width ``out_dim``).
    """
    if model == "gcn":
        return GCNLayer(in_dim, out_dim, order=order), out_dim
    if model in ("sage", "sage-max"):
        aggr = "max" if model == "sage-max" else "mean"
        return SAGELayer(in_dim, out_dim, order=order, aggr=aggr), out_dim
    if model == "gin":
        return GINLayer(in_dim, out_dim, eps=eps, train_eps=train_eps, order=order), out_dim
    num_heads, concat = (out_heads, False) if last else (heads, True)
    width = num_heads * out_dim if concat else out_dim
    if model in ("gat", "gatv2"):
        layer = GATLayer if model == "gat" else GATv2Layer
        return layer(in_dim, out_dim, heads=num_heads, concat=concat,
                     dropout=attn_dropout), width
    if model == "graphconv":
        from torch_geometric.nn import GraphConv

        return DistributedConv(GraphConv(in_dim, out_dim)), out_dim
    raise ValueError(f"unknown model {model!r}; choose one of {', '.join(MODEL_NAMES)}")


def _autocast_bf16(x: torch.Tensor) -> torch.dtype | None:
    """``torch.bfloat16`` when ``x`` is on the CPU under bf16 autocast, else None."""
    if x.device.type != "cpu":
        return None
    return torch.bfloat16 if cpu_autocast_dtype() == torch.bfloat16 else None


def _rows_dtype(layer: nn.Module, half: torch.dtype | None) -> torch.dtype | None:
    """The dtype the dropout before ``layer`` writes: bf16 under CPU bf16 autocast for layers
    whose aggregation reads bf16 rows at half width (their transforms would round the rows to
    bf16 anyway), else the input's own."""
    return half if getattr(layer, "takes_half_rows", False) else None


class GNN(nn.Module):
    r"""``num_layers`` graph layers for node classification. Layer :math:`l` computes

    .. math:: h_{l+1} = \sigma\Big(\mathrm{norm}\big(\mathrm{layer}_l(\mathrm{drop}(h_l))
              + \mathrm{skip}_l(\mathrm{drop}(h_l))\big)\Big)

    where the skip (``residual=True``) is the identity when the widths agree and a bias-free
    linear projection otherwise, and the norm and activation :math:`\sigma` are left out after
    the last layer, which returns logits. Norms use statistics over the whole graph
    (:mod:`gnnscale.nn.norms`).

    Args:
        model: layer type, one of :data:`MODEL_NAMES`.
        in_dim: input feature width.
        hidden_dim: width of the hidden layers (per head for ``gat``/``gatv2``).
        out_dim: number of classes (logit width).
        num_layers: number of graph layers (>= 1; default 2).
        dropout: dropout probability applied to every layer's input (default 0.5).
        order: aggregation order of GCN/SAGE/GIN layers (default ``"auto"``).
        heads: attention heads of hidden ``gat``/``gatv2`` layers (default 8).
        out_heads: attention heads of the last layer, averaged (default 1).
        attn_dropout: dropout on attention coefficients (default 0).
        residual: add skip connections (default False).
        norm: ``None`` (default), ``"batch"``, ``"layer"`` (node-wise) or ``"layer-graph"``.
        activation: ``"relu"`` (default), ``"elu"`` or ``"gelu"``.
        train_eps, eps: GIN's :math:`\epsilon` (default fixed at 0).

    Shapes: x ``[num_owned, in_dim]`` -> logits ``[num_owned, out_dim]``.
    """

    def __init__(self, model: str, in_dim: int, hidden_dim: int, out_dim: int,
                 num_layers: int = 2, dropout: float = 0.5, order: str = "auto", *,
                 heads: int = 8, out_heads: int = 1, attn_dropout: float = 0.0,
                 residual: bool = False, norm: str | None = None, activation: str = "relu",
                 train_eps: bool = False, eps: float = 0.0):
        super().__init__()
        if model not in MODEL_NAMES:
            raise ValueError(f"unknown model {model!r}; choose one of {', '.join(MODEL_NAMES)}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if norm not in (None, "none", *NORMS):
            raise ValueError(f"unknown norm {norm!r}; choose one of none, {', '.join(NORMS)}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of "
                             f"{', '.join(ACTIVATIONS)}")
        self.model_name, self.dropout, self.activation = model, dropout, activation
        self.layers, self.skips, self.norms = nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        width = in_dim
        for i in range(num_layers):
            last = i == num_layers - 1
            layer, out_width = build_layer(
                model, width, out_dim if last else hidden_dim, last, order=order, heads=heads,
                out_heads=out_heads, attn_dropout=attn_dropout, train_eps=train_eps, eps=eps)
            self.layers.append(layer)
            if residual:
                self.skips.append(nn.Identity() if width == out_width
                                  else nn.Linear(width, out_width, bias=False))
            if not last:
                self.norms.append(make_norm(norm, out_width) or nn.Identity())
            width = out_width

    #: ReLU, the next layer's input dropout and its transform in one blocked pass where that
    #: layer transforms first (float32 CPU; :mod:`gnnscale.nn.fused_transform`); False forms
    #: the activation as a tensor
    fuse_activation = True

    def forward(self, x: torch.Tensor, graph: RankGraph,
                rows: torch.Tensor | None = None) -> torch.Tensor:
        """Logits of every owned row, or of rows ``rows`` only (int64 owned row indices, e.g.
        the loss's: the last layer then computes only those where it can, its aggregation
        reading only their edges; otherwise every row is computed and these selected). Where
        the graph can say which rows those read (:meth:`RankGraph.rows_read_by`: an edge cut;
        on several ranks the rows sent to peers' halos among them), the layers before compute
        only the rows read after them: their products and passes skip the nodes no loss row
        depends on (e.g. isolated nodes outside the loss). The hidden dropout then draws its
        mask over the rows computed, a different draw from the whole forward's.

        Between two layers: the norm, then the activation and the next layer's input dropout
        (a ReLU in one pass with the dropout, or with the dropout and the next layer itself
        where that layer transforms first; the layer before may then leave its bias, and an
        aggregate-first layer its product, to that pass)."""
        half = _autocast_bf16(x)
        last = len(self.layers) - 1
        last_rows = rows if rows is not None and self._takes_rows(last) else None
        computed = self._rows_computed(graph, last_rows)
        x = fast_dropout(x, self.dropout, self.training, dtype=_rows_dtype(self.layers[0], half))
        h, bias = self._layer(0, x, graph, half, computed)
        for i in range(1, last + 1):  # layer i-1's output h (its bias still to add) -> layer i's
            norm = self.norms[i - 1]
            if not isinstance(norm, nn.Identity):
                h = norm(h, graph)
            if self.activation == "relu":
                fused = self._next_layer_on_activated(i, h, half, graph, bias, computed[i],
                                                      computed[i - 1])
                if fused is not None:  # ReLU, layer i's input dropout and layer i in one pass
                    h, bias = fused, None
                    continue
                if isinstance(h, PendingLinear):  # layer i declined the product after all
                    h = h.materialize()
                if bias is not None:
                    h, bias = h + bias, None
                # the activation and layer i's input dropout in one pass
                x, h = relu_dropout(h, self.dropout, self.training,
                                    dtype=_rows_dtype(self.layers[i], half)), None
            else:
                x, h = ACTIVATIONS[self.activation](h), None
                x = fast_dropout(x, self.dropout, self.training,
                                 dtype=_rows_dtype(self.layers[i], half))
            h, bias = self._layer(i, x, graph, half, computed)
        if rows is not None and last_rows is None:
            h = h.index_select(0, rows)
        return h

    def _layer(self, index: int, x: torch.Tensor, graph: RankGraph, half,
               computed: list) -> tuple:
        """``(h, bias)``: layer ``index`` on its input ``x`` (already through its dropout),
        with the skip; ``bias`` is the layer's bias left to the next layer's fused pass
        (:meth:`_bias_deferred`: ``h`` then lacks it and may be a :class:`PendingLinear`
        product), else None. The layer computes rows ``computed[index]`` only, from an input
        holding rows ``computed[index - 1]`` only, where given."""
        layer = self.layers[index]
        narrowed = {} if computed[index] is None else {
            "rows": computed[index], "columns": computed[index - 1] if index else None}
        if self._bias_deferred(index, x, half):  # added in the next layer's fused pass
            h, bias = layer.forward_unbiased(x, graph, **narrowed)
        else:
            h, bias = layer(x, graph, **narrowed), None
        if len(self.skips):
            h = h + self.skips[index](x)
        return h, bias

    def _rows_computed(self, graph: RankGraph, last_rows: torch.Tensor | None) -> list:
        """Per layer, the owned rows it computes (None: every row): ``last_rows`` for the last
        layer and, going back while the graph can tell (:meth:`RankGraph.rows_read_by`), the
        rows each next layer reads, for a layer that computes a subset of its output rows
        followed by nothing that mixes rows (no norm) and a layer that takes such an input."""
        computed = [None] * len(self.layers)
        computed[-1] = last_rows
        for i in range(len(self.layers) - 2, -1, -1):
            if (computed[i + 1] is None or not self._takes_rows(i)
                    or not getattr(self.layers[i + 1], "takes_input_rows", False)
                    or not isinstance(self.norms[i], nn.Identity)):
                break
            computed[i] = graph.rows_read_by(computed[i + 1])
        return computed

    def _takes_rows(self, index: int) -> bool:
        """Whether layer ``index`` computes a subset of its output rows itself (no skip adds
        its whole input to it)."""
        return getattr(self.layers[index], "takes_output_rows", False) and not len(self.skips)

    def _next_layer_on_activated(self, index: int, h: torch.Tensor, half, graph: RankGraph,
                                 bias: torch.Tensor | None = None,
                                 rows: torch.Tensor | None = None,
                                 columns: torch.Tensor | None = None):
        """Layer ``index`` on ``relu_dropout(h + bias)`` without forming the activation (its
        output rows ``rows`` only, where given; ``h`` holding owned rows ``columns`` only,
        where given), or None where it cannot (the layer aggregates first, no such method, a
        skip needs its input, bf16)."""
        if not self._may_fuse_into(index, half):
            return None
        narrowed = {} if rows is None else {"rows": rows, "columns": columns}
        return self.layers[index].forward_activated(h, self.dropout, self.training, graph,
                                                    bias, **narrowed)

    def _may_fuse_into(self, index: int, half) -> bool:
        """Whether layer ``index`` may take its input activation fused (it has
        ``forward_activated``, the fusion is on, no skip needs the activation, not bf16);
        the layer itself still declines where it aggregates first or the rows do not suit."""
        return (hasattr(self.layers[index], "forward_activated") and self.fuse_activation
                and not len(self.skips) and half is None)

    def _bias_deferred(self, index: int, x: torch.Tensor, half) -> bool:
        """Whether layer ``index`` leaves its bias to the next layer's fused pass: that pass
        runs (ReLU, no norm, the next layer may fuse and transforms first, float32 CPU rows)
        and the layer can (:meth:`GCNLayer.forward_unbiased`)."""
        if (index + 1 >= len(self.layers) or self.activation != "relu"
                or not isinstance(self.norms[index], nn.Identity)
                or not self._may_fuse_into(index + 1, half)):
            return False
        return (hasattr(self.layers[index], "forward_unbiased")
                and getattr(self.layers[index + 1], "transform_first", False) and can_fuse(x))
