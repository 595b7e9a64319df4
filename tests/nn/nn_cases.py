"""Cases shared by the nn exactness driver (under mpirun) and the one-process PyG reference.

Each case is a model built from the same seed on every rank and in the reference. The reference
(:func:`whole_graph_reference`) swaps every distributed layer for PyG's own layer (and every
norm for torch's/PyG's) with copied weights, run on the whole graph.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from gnnscale.data import GraphData, generate_sbm, load_dataset
from gnnscale.nn import (GATLayer, GATv2Layer, GCNLayer, GINLayer, GNN, SAGELayer,
                         DistributedBatchNorm, DistributedConv, LayerNorm)

STEPS = 4
LR, WEIGHT_DECAY, HIDDEN, SEED = 0.01, 5e-4, 16, 5
PARTITIONERS = ("random", "metis")


def directed_graph() -> GraphData:
    """A small awkward graph: directed edges, isolated nodes, self-loops and repeated edges."""
    base = generate_sbm(num_nodes=300, num_classes=4, avg_degree=6.0, num_features=24,
                        train_per_class=20, num_val=60, num_test=100, seed=7,
                        isolated_fraction=0.1)
    rng = np.random.default_rng(7)
    src, dst = base.edge_index()
    keep = rng.random(src.shape[0]) >= 0.3  # drop one direction of many edges
    src, dst = src[keep], dst[keep]
    loops = rng.choice(base.num_nodes, size=30, replace=False)
    repeats = rng.choice(src.shape[0], size=10, replace=False)
    src = np.concatenate([src, loops, src[repeats]])
    dst = np.concatenate([dst, loops, dst[repeats]])
    return GraphData.from_edge_index(np.stack([src, dst]), base.num_nodes, base.x, base.y,
                                     base.train_mask, base.val_mask, base.test_mask,
                                     name="directed")


def load_case_dataset(name: str, datasets_root) -> GraphData:
    if name == "cora":
        return load_dataset("cora", root=str(datasets_root))
    return directed_graph()


class ConvStack(nn.Module):
    """Distributed PyG layers with ReLU between them (wrapper cases)."""

    def __init__(self, convs):
        super().__init__()
        self.layers = nn.ModuleList(DistributedConv(conv) for conv in convs)

    def forward(self, x, graph):
        for i, layer in enumerate(self.layers):
            x = layer(x, graph)
            if i < len(self.layers) - 1:
                x = F.relu(x)
        return x


def _wrapped(f, c):
    from torch_geometric.nn import (ClusterGCNConv, GATConv, GATv2Conv, GINConv, LEConv,
                                    TransformerConv)

    return {
        "wrap-transformer": lambda: ConvStack([TransformerConv(f, 8, heads=2),
                                               TransformerConv(16, c, heads=2, concat=False)]),
        "wrap-clustergcn": lambda: ConvStack([ClusterGCNConv(f, 16), ClusterGCNConv(16, c)]),
        "wrap-leconv-gin": lambda: ConvStack([LEConv(f, 16), GINConv(
            nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, c)), train_eps=True)]),
        # bipartite input with one self-loop added per destination
        "wrap-gat-gatv2": lambda: ConvStack([GATConv(f, 8, heads=2), GATv2Conv(16, c)]),
    }


# name -> (dataset, GNN keyword arguments) ; wrapper cases have kwargs None
CASES = {
    "sage-max": ("directed", dict(model="sage-max")),
    "gat": ("directed", dict(model="gat", heads=4)),
    "gat-deep": ("directed", dict(model="gat", num_layers=3, heads=2, out_heads=2,
                                  residual=True, norm="batch", activation="elu")),
    "gin": ("directed", dict(model="gin")),
    "gin-eps": ("directed", dict(model="gin", train_eps=True, eps=0.1, order="aggregate_first",
                                 residual=True, norm="layer")),
    "gcn-deep": ("directed", dict(model="gcn", num_layers=3, residual=True, norm="batch")),
    "sage-layer-graph": ("directed", dict(model="sage", num_layers=3, norm="layer-graph")),
    "gatv2": ("directed", dict(model="gatv2", heads=2)),
    "graphconv": ("directed", dict(model="graphconv")),
    "wrap-transformer": ("directed", None),
    "wrap-clustergcn": ("directed", None),
    "wrap-leconv-gin": ("directed", None),
    "wrap-gat-gatv2": ("directed", None),
    "cora-gat": ("cora", dict(model="gat", heads=8, hidden_dim=8)),
    "cora-sage-max": ("cora", dict(model="sage-max")),
}
DATASETS = tuple(sorted({dataset for dataset, _ in CASES.values()}))
# A bias feeding a batch norm has a zero gradient up to rounding (the norm removes any shift);
# Adam divides that rounding noise by its own size and moves the bias by ~lr per step, which
# shows in eval mode through the running mean. SGD keeps such noise at rounding size.
SGD_CASES = ("gat-deep", "gcn-deep")


def make_optimizer(case: str, params) -> torch.optim.Optimizer:
    if case in SGD_CASES:
        return torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=WEIGHT_DECAY)
    return torch.optim.Adam(params, lr=LR, weight_decay=WEIGHT_DECAY)


def initial_model(case: str, data) -> nn.Module:
    """The model every rank (and the reference) starts from: same seed, same weights."""
    _, kwargs = CASES[case]
    torch.manual_seed(SEED)
    if kwargs is None:
        return _wrapped(data.num_features, data.num_classes)[case]()
    kwargs = dict(kwargs)
    return GNN(kwargs.pop("model"), data.num_features, kwargs.pop("hidden_dim", HIDDEN),
               data.num_classes, dropout=0.0, **kwargs)


class WholeGraph(nn.Module):
    """A PyG conv (or torch norm) on the whole graph, called like a distributed module."""

    def __init__(self, module, edge_index=None):
        super().__init__()
        self.module, self.edge_index = module, edge_index

    def forward(self, x, graph=None):
        if self.edge_index is None:
            return self.module(x)
        return self.module(x, self.edge_index)


def _pyg_layer(layer):
    from torch_geometric.nn import GATConv, GATv2Conv, GCNConv, GINConv, SAGEConv

    if isinstance(layer, DistributedConv):
        return copy.deepcopy(layer.conv)
    if isinstance(layer, GCNLayer):
        conv = GCNConv(layer.in_dim, layer.out_dim)
        conv.lin.weight.data.copy_(layer.lin.weight)
        conv.bias.data.copy_(layer.bias)
    elif isinstance(layer, SAGELayer):
        conv = SAGEConv(layer.in_dim, layer.out_dim, aggr=layer.aggr)
        conv.load_state_dict(layer.state_dict())
    elif isinstance(layer, GATv2Layer):  # before GATLayer: a subclass of it
        conv = GATv2Conv(layer.in_dim, layer.out_dim, heads=layer.heads, concat=layer.concat)
        conv.load_state_dict(layer.state_dict())
    elif isinstance(layer, GATLayer):
        conv = GATConv(layer.in_dim, layer.out_dim, heads=layer.heads, concat=layer.concat)
        conv.load_state_dict(layer.state_dict())
    elif isinstance(layer, GINLayer):
        # GINConv re-initialises its nn on construction: copy the weights in afterwards.
        conv = GINConv(copy.deepcopy(layer.nn), eps=float(layer.eps.detach()),
                       train_eps=isinstance(layer.eps, nn.Parameter))
        conv.load_state_dict(layer.state_dict())
    else:
        raise TypeError(f"no PyG counterpart for {type(layer).__name__}")
    return conv


def _torch_norm(norm):
    from torch_geometric.nn import LayerNorm as PyGLayerNorm

    if isinstance(norm, DistributedBatchNorm):
        ref = nn.BatchNorm1d(norm.num_features, eps=norm.eps, momentum=norm.momentum)
    elif isinstance(norm, LayerNorm):
        ref = PyGLayerNorm(norm.num_features, eps=norm.eps, mode=norm.mode)
    else:
        return norm
    ref.load_state_dict(norm.state_dict())
    return WholeGraph(ref)


def whole_graph_reference(model: nn.Module, edge_index: torch.Tensor) -> nn.Module:
    """A copy of ``model`` with every distributed layer and norm replaced by PyG's/torch's."""
    reference = copy.deepcopy(model)
    for i, layer in enumerate(model.layers):
        reference.layers[i] = WholeGraph(_pyg_layer(layer), edge_index)
    for i, norm in enumerate(getattr(model, "norms", [])):
        reference.norms[i] = _torch_norm(norm)
    return reference


def case_key(case: str, partitioner: str) -> str:
    return f"{case}-{partitioner}"
