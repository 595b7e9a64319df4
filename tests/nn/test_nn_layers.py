"""One-process checks of the nn layers, norms, wrapper and model options (no mpirun).

Multi-rank equality with PyG is in test_nn_exactness.py; here: options the exactness cases do
not cover, error messages, and backwards compatibility of GNN.
"""

import numpy as np
import pytest
import torch
from torch import nn
from torch_geometric import nn as pyg_nn

from gnnscale.comm.single import SingleCommunicator
from gnnscale.data import GraphData, generate_sbm
from gnnscale.graph import LocalGraph
from gnnscale.nn import (GATLayer, GATv2Layer, GCNLayer, GINLayer, GNN, MODEL_NAMES, SAGELayer,
                         DistributedBatchNorm, DistributedConv, LayerNorm)
from partitioning.local_view import build_part_view

TOL = 1e-5


@pytest.fixture(scope="module")
def graph_and_data():
    base = generate_sbm(num_nodes=120, num_features=10, avg_degree=5.0, seed=3,
                        isolated_fraction=0.1, num_val=20, num_test=20)
    src, dst = base.edge_index()
    keep = np.random.default_rng(3).random(src.shape[0]) > 0.3
    loops = np.arange(0, 120, 9)
    repeats = np.arange(0, src.shape[0], 7)  # repeated edges: exact ties in a max
    edge_index = np.stack([np.concatenate([src[keep], loops, src[repeats]]),
                           np.concatenate([dst[keep], loops, dst[repeats]])])
    data = GraphData.from_edge_index(edge_index, base.num_nodes, base.x, base.y, base.train_mask,
                                     base.val_mask, base.test_mask)
    view = build_part_view(data, np.zeros(data.num_nodes, dtype=np.int64), 0, num_parts=1)
    pyg = data.to_pyg()
    return LocalGraph(view, SingleCommunicator()), pyg.x, pyg.edge_index


def close(a, b) -> bool:
    a, b = a.detach(), b.detach()
    return float((a - b).abs().max()) <= TOL * max(float(b.abs().max()), 1e-12)


@pytest.mark.parametrize("aggr", ["mean", "sum", "max"])
@pytest.mark.parametrize("order", ["aggregate_first", "transform_first"])
def test_sage_aggregators_equal_pyg(graph_and_data, aggr, order):
    graph, x, edge_index = graph_and_data
    torch.manual_seed(0)
    ours = SAGELayer(10, 6, aggr=aggr, order=order)
    ref = pyg_nn.SAGEConv(10, 6, aggr=aggr)
    ref.load_state_dict(ours.state_dict())
    x = x.clone().requires_grad_(True)
    out, expected = ours(x, graph), ref(x, edge_index)
    assert close(out, expected)
    weights = torch.randn(out.shape)
    (grad,) = torch.autograd.grad((out * weights).sum(), x)
    (ref_grad,) = torch.autograd.grad((expected * weights).sum(), x)
    assert close(grad, ref_grad)


def test_sage_rejects_unknown_aggregator():
    with pytest.raises(ValueError, match="unknown SAGE aggregator 'lstm'"):
        SAGELayer(4, 4, aggr="lstm")


@pytest.mark.parametrize("self_loops", [True, False])
@pytest.mark.parametrize("ours_cls, ref_cls", [(GATLayer, pyg_nn.GATConv),
                                               (GATv2Layer, pyg_nn.GATv2Conv)])
def test_gat_equals_pyg_with_and_without_self_loops(graph_and_data, self_loops, ours_cls,
                                                     ref_cls):
    graph, x, edge_index = graph_and_data
    torch.manual_seed(1)
    ours = ours_cls(10, 4, heads=3, concat=False, add_self_loops=self_loops, negative_slope=0.1)
    torch.nn.init.normal_(ours.bias)  # non-zero biases, so misplaced ones show
    ref = ref_cls(10, 4, heads=3, concat=False, add_self_loops=self_loops, negative_slope=0.1)
    ref.load_state_dict(ours.state_dict())
    x = x.clone().requires_grad_(True)
    out = ours(x, graph)
    expected = ref(x, edge_index)
    assert close(out, expected)
    (grad,) = torch.autograd.grad(out.square().sum(), x)
    (ref_grad,) = torch.autograd.grad(expected.square().sum(), x)
    assert close(grad, ref_grad)


def test_gat_attention_dropout_only_while_training(graph_and_data):
    graph, x, _ = graph_and_data
    layer = GATLayer(10, 4, heads=2, dropout=0.5)
    layer.train()
    assert not torch.equal(layer(x, graph), layer(x, graph))
    layer.eval()
    assert torch.equal(layer(x, graph), layer(x, graph))


def test_gat_value_dropout_drops_messages_not_attention():
    """On a graph of self loops only each node's one message has attention 1: the output is
    the node's transformed features, each value dropped (and the rest scaled) while training."""
    n = 50
    data = GraphData.from_edge_index(np.stack([np.arange(n), np.arange(n)]), n,
                                     np.random.default_rng(0).standard_normal((n, 6)),
                                     np.zeros(n, dtype=np.int64), np.ones(n, bool),
                                     np.zeros(n, bool), np.zeros(n, bool))
    view = build_part_view(data, np.zeros(n, dtype=np.int64), 0, num_parts=1)
    graph, x = LocalGraph(view, SingleCommunicator()), torch.from_numpy(data.x)
    layer = GATLayer(6, 4, heads=2, bias=False, value_dropout=0.5)
    full = layer.lin(x)
    layer.eval()
    assert close(layer(x, graph), full)
    layer.train()
    out = layer(x, graph)
    dropped = out == 0
    assert 0.35 < dropped.float().mean() < 0.65
    assert close(out[~dropped], 2 * full[~dropped])
    with pytest.raises(ValueError, match="value dropout must be in"):
        GATLayer(6, 4, value_dropout=1.0)


def test_gin_orders_agree_and_eps_is_learned(graph_and_data):
    graph, x, _ = graph_and_data
    torch.manual_seed(2)
    first = GINLayer(10, 3, hidden_dim=5, eps=0.2, train_eps=True, order="transform_first")
    second = GINLayer(10, 3, hidden_dim=5, eps=0.2, train_eps=True, order="aggregate_first")
    second.load_state_dict(first.state_dict())
    assert first.transform_first and not second.transform_first
    assert close(first(x, graph), second(x, graph))
    first(x, graph).sum().backward()
    assert first.eps.grad is not None and float(first.eps.grad.abs()) > 0


def test_gin_custom_mlp_equals_pyg(graph_and_data):
    graph, x, edge_index = graph_and_data
    torch.manual_seed(3)
    ours = GINLayer(10, 3, mlp=nn.Sequential(nn.Linear(10, 3), nn.Tanh()), eps=0.5)
    ref = pyg_nn.GINConv(nn.Sequential(nn.Linear(10, 3), nn.Tanh()), eps=0.5)
    ref.load_state_dict(ours.state_dict())
    assert not ours.transform_first
    assert close(ours(x, graph), ref(x, edge_index))


def test_batch_norm_equals_torch_forward_backward_and_eval():
    torch.manual_seed(4)
    ours, ref = DistributedBatchNorm(5), nn.BatchNorm1d(5)

    class Graph:  # a norm needs only the communicator
        comm = SingleCommunicator()

    for _ in range(3):
        x = (torch.randn(50, 5) * 3 + 7).requires_grad_(True)
        out, expected = ours(x, Graph), ref(x)
        assert close(out, expected)
        weights = torch.randn(50, 5)
        (grad,) = torch.autograd.grad((out * weights).sum(), x)
        (ref_grad,) = torch.autograd.grad((expected * weights).sum(), x)
        assert close(grad, ref_grad)
    assert close(ours.running_mean, ref.running_mean) and close(ours.running_var, ref.running_var)
    ours.eval(), ref.eval()
    x = torch.randn(20, 5)
    assert close(ours(x, Graph), ref(x))


@pytest.mark.parametrize("mode", ["node", "graph"])
def test_layer_norm_equals_pyg(mode):
    torch.manual_seed(5)
    ours, ref = LayerNorm(6, mode=mode), pyg_nn.LayerNorm(6, mode=mode)
    with torch.no_grad():
        ours.weight.uniform_(0.5, 2.0), ours.bias.uniform_(-1.0, 1.0)
    ref.load_state_dict(ours.state_dict())

    class Graph:
        comm = SingleCommunicator()

    x = torch.randn(40, 6) * 2 + 1
    assert close(ours(x, Graph), ref(x))


def test_wrapper_runs_pair_and_single_input_layers(graph_and_data):
    graph, x, edge_index = graph_and_data
    torch.manual_seed(6)
    for conv, bipartite in [(pyg_nn.GraphConv(10, 4, aggr="max"), True),
                            (pyg_nn.ResGatedGraphConv(10, 4), True),
                            (pyg_nn.ClusterGCNConv(10, 4), False),
                            (pyg_nn.GCNConv(10, 4, normalize=False), False)]:
        wrapped = DistributedConv(conv)
        assert wrapped.bipartite is bipartite, type(conv).__name__
        assert close(wrapped(x, graph), conv(x, edge_index)), type(conv).__name__


@pytest.mark.parametrize("conv", [pyg_nn.GCNConv(4, 4), pyg_nn.ChebConv(4, 4, K=2),
                                  pyg_nn.SGConv(4, 4, K=2)])
def test_wrapper_refuses_layers_that_need_more_than_one_hop(conv):
    with pytest.raises(ValueError, match="cannot run distributed on one-hop halos"):
        DistributedConv(conv)


def test_wrapper_refuses_lazy_layers():
    with pytest.raises(ValueError, match="lazy parameters"):
        DistributedConv(pyg_nn.GraphConv(-1, 4))


def test_wrapper_refuses_a_plain_module():
    with pytest.raises(TypeError, match="MessagePassing"):
        DistributedConv(nn.Linear(4, 4))


def test_model_names_and_bad_options():
    assert MODEL_NAMES[:2] == ("gcn", "sage")
    assert {"sage-max", "gat", "gin", "gatv2", "graphconv"} <= set(MODEL_NAMES)
    for kwargs, message in [(dict(model="gcnn"), "unknown model 'gcnn'"),
                            (dict(model="gcn", norm="group"), "unknown norm 'group'"),
                            (dict(model="gcn", activation="tanh"), "unknown activation"),
                            (dict(model="gcn", num_layers=0), "num_layers must be at least 1")]:
        with pytest.raises(ValueError, match=message):
            GNN(in_dim=4, hidden_dim=4, out_dim=2, **kwargs)


def test_gnn_keeps_its_original_weights_and_state_dict_keys():
    torch.manual_seed(7)
    model = GNN("gcn", 12, 8, 3, num_layers=2, dropout=0.5)
    torch.manual_seed(7)
    layers = [GCNLayer(12, 8), GCNLayer(8, 3)]
    assert sorted(model.state_dict()) == ["layers.0.bias", "layers.0.lin.weight",
                                          "layers.1.bias", "layers.1.lin.weight"]
    for ours, old in zip(model.layers, layers):
        assert torch.equal(ours.lin.weight, old.lin.weight)


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_every_model_trains_deep_with_all_options(graph_and_data, model):
    graph, x, _ = graph_and_data
    torch.manual_seed(8)
    net = GNN(model, 10, 4, 3, num_layers=4, dropout=0.2, heads=2, residual=True, norm="batch",
              activation="elu")
    out = net(x, graph)
    assert out.shape == (x.shape[0], 3) and torch.isfinite(out).all()
    out.logsumexp(dim=1).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
