"""Shared by the DGL-environment tests: DGL's own layers carrying gnnscale's weights."""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

LR, WEIGHT_DECAY, STEPS = 0.01, 5e-4, 5


def dgl_layers(model):
    """DGL GraphConv/SAGEConv copies of a gnnscale ``GNN``'s layers (same weights)."""
    from dgl.nn import GraphConv, SAGEConv

    layers = []
    for layer in model.layers:
        if model.model_name == "gcn":
            conv = GraphConv(layer.in_dim, layer.out_dim, norm="both")
            conv.weight.data.copy_(layer.lin.weight.t())
            conv.bias.data.copy_(layer.bias)
        else:
            conv = SAGEConv(layer.in_dim, layer.out_dim, "mean")
            conv.fc_neigh.weight.data.copy_(layer.lin_l.weight)
            conv.fc_self.bias.data.copy_(layer.lin_l.bias)  # DGL 2.1 keeps the bias here
            conv.fc_self.weight.data.copy_(layer.lin_r.weight)
        layers.append(conv)
    return torch.nn.ModuleList(layers)


def dgl_graph_for(model_name: str, graph):
    """GCN's normalisation counts a self loop per node (gnnscale/PyG add it; DGL does not)."""
    import dgl

    return dgl.add_self_loop(dgl.remove_self_loop(graph)) if model_name == "gcn" else graph


def dgl_train(model, graph, steps: int = STEPS):
    """Train DGL copies of ``model`` on the whole DGL ``graph``: (losses, final logits)."""
    layers = dgl_layers(model)
    g = dgl_graph_for(model.model_name, graph)
    x, y, train = graph.ndata["feat"], graph.ndata["label"], graph.ndata["train_mask"]

    def forward():
        h = x
        for i, conv in enumerate(layers):
            h = conv(g, h)
            if i < len(layers) - 1:
                h = F.relu(h)
        return h

    optimizer = torch.optim.Adam(layers.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(forward()[train], y[train])
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    with torch.no_grad():
        return np.asarray(losses), forward().numpy()
