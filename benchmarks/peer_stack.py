"""The peers' models arranged as gnnscale's GNN, for the benchmarks that race them.

``Stack`` puts DGL or PyG conv layers in gnnscale's order (dropout on every layer's input,
ReLU after every layer but the last, GAT too); ``PygAdapter`` lets a PyG conv, which takes
``(x, edge_index or adj_t)``, sit in it; ``copy_weights`` copies a gnnscale GNN's weights
into the peer's layers so that both start from the same point (with dropout 0 their first
losses agree up to rounding). Used by engine_vs_dgl.py, large_graph_peer.py and
sar_vs_gnnscale.py; imported from the benchmarks folder (a script's own folder is on its
``sys.path``).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


class Stack(torch.nn.Module):
    """Foreign conv layers called ``conv(graph, x)``, with ReLU and dropout as gnnscale's GNN
    has them."""

    def __init__(self, convs, dropout: float):
        super().__init__()
        self.convs = torch.nn.ModuleList(convs)
        self.dropout = dropout

    def forward(self, graph, x):
        for i, conv in enumerate(self.convs):
            x = F.dropout(x, self.dropout, self.training)
            x = conv(graph, x)
            if i < len(self.convs) - 1:
                x = F.relu(x)
        return x


class PygAdapter(torch.nn.Module):
    """PyG convs take (x, edge_index or adj_t); Stack calls conv(graph, x)."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, graph, x):
        return self.conv(x, graph)


def copy_weights(model_name: str, ours, convs, library: str) -> None:
    """Copy gnnscale GNN ``ours``'s layer weights into ``convs`` (DGL's or PyG's, ``library``
    "dgl" or "pyg"), before any PygAdapter wraps them."""
    for layer, conv in zip(ours.layers, convs):
        with torch.no_grad():
            if model_name == "gat":
                if library == "dgl":  # fc, attn_l (source side), attn_r (destination side)
                    conv.fc.weight.copy_(layer.lin.weight)
                    conv.attn_l.copy_(layer.att_src)
                    conv.attn_r.copy_(layer.att_dst)
                    # DGL adds a bias per head before averaging; the same one on every head
                    conv.bias.copy_(layer.bias if layer.concat else layer.bias.repeat(layer.heads))
                else:  # PyG's GATConv: gnnscale's layout exactly
                    conv.lin.weight.copy_(layer.lin.weight)
                    conv.att_src.copy_(layer.att_src)
                    conv.att_dst.copy_(layer.att_dst)
                    conv.bias.copy_(layer.bias)
            elif model_name == "gcn":
                weight = layer.lin.weight
                if library == "dgl":
                    conv.weight.copy_(weight.t())
                else:
                    conv.lin.weight.copy_(weight)
                conv.bias.copy_(layer.bias)
            elif library == "dgl":
                conv.fc_neigh.weight.copy_(layer.lin_l.weight)
                conv.fc_self.bias.copy_(layer.lin_l.bias)  # DGL 2.1: the bias is here
                conv.fc_self.weight.copy_(layer.lin_r.weight)
            else:
                conv.lin_l.weight.copy_(layer.lin_l.weight)
                conv.lin_l.bias.copy_(layer.lin_l.bias)
                conv.lin_r.weight.copy_(layer.lin_r.weight)
