"""Stacks of distributed graph layers for node classification."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..graph import LocalGraph
from .conv import GCNLayer, SAGELayer
from .dropout import dropout as fast_dropout

LAYERS = {"gcn": GCNLayer, "sage": SAGELayer}
MODEL_NAMES = tuple(LAYERS)


class GNN(nn.Module):
    """``num_layers`` graph layers with ReLU between them and dropout before each.

    Args:
        model: layer type, one of :data:`MODEL_NAMES` (``"gcn"``, ``"sage"``).
        in_dim: input feature width.
        hidden_dim: width of the hidden layers.
        out_dim: number of classes (logit width).
        num_layers: number of graph layers (>= 1; default 2).
        dropout: dropout probability applied to every layer's input (default 0.5).
        order: aggregation order passed to every layer (default ``"auto"``).

    Shapes: x ``[num_owned, in_dim]`` -> logits ``[num_owned, out_dim]``.
    """

    def __init__(self, model: str, in_dim: int, hidden_dim: int, out_dim: int,
                 num_layers: int = 2, dropout: float = 0.5, order: str = "auto"):
        super().__init__()
        if model not in LAYERS:
            raise ValueError(f"unknown model {model!r}; choose one of {', '.join(MODEL_NAMES)}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        widths = [in_dim] + [hidden_dim] * (num_layers - 1) + [out_dim]
        layer = LAYERS[model]
        self.model_name = model
        self.dropout = dropout
        self.layers = nn.ModuleList(layer(a, b, order=order) for a, b in zip(widths, widths[1:]))

    def forward(self, x: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = fast_dropout(x, self.dropout, self.training)
            x = layer(x, graph)
            if i < len(self.layers) - 1:
                x = F.relu(x)
        return x
