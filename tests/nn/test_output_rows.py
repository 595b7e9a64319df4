"""Training's logits of the loss's rows only: ``GNN(x, graph, rows)`` equals the full forward's
rows ``rows``, values and gradients, whether the last layer computes only those rows (GCN,
SAGE mean/sum: its aggregation reads only their edges) or every row and selects (GAT, SAGE-max,
residual models). Where the graph tells which rows those read (here one rank; several:
test_narrowed_ranks.py), the layers before
compute only the rows read after them: with dropout 0 the same numbers; with dropout the
hidden mask is drawn over the rows computed, checked against the whole layers on that mask.
The trainer asks for the training rows this way; its launches on several ranks are checked
against one process in tests/engine."""

import numpy as np
import pytest
import torch

from gnnscale.comm import SingleCommunicator
from gnnscale.data import generate_sbm
from gnnscale.engine import LocalProblem
from gnnscale.nn import GNN
from gnnscale.nn import dropout as dropout_module


def _problem():
    # sparse enough that the training rows and their in-neighbours are not every node (226
    # of 400), nor are their in-neighbours in turn (339)
    data = generate_sbm(num_nodes=400, num_classes=4, avg_degree=3.0, num_features=40,
                        train_per_class=20, num_val=40, num_test=40, seed=5)
    return LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64),
                                        SingleCommunicator())


@pytest.mark.parametrize("model, kwargs", [
    ("gcn", {}), ("sage", {}), ("gcn", {"order": "aggregate_first"}),
    ("sage", {"order": "aggregate_first"}), ("sage-max", {}), ("gat", {"heads": 2}),
    ("gcn", {"residual": True}), ("gcn", {"num_layers": 1}), ("sage", {"num_layers": 3}),
])
@pytest.mark.parametrize("p", [0.5, 0.0])
def test_rows_equal_the_full_forward_selected(model, kwargs, p, monkeypatch):
    problem = _problem()
    rows = problem.masks["train"].nonzero().squeeze(1)
    read = problem.graph.rows_read_by(rows)
    assert read is not None and rows.numel() < read.numel() < problem.graph.num_owned
    if p > 0:  # the same masks only where every row is computed before the last layer
        monkeypatch.setattr(problem.graph, "rows_read_by", lambda rows: None)
    grad = torch.randn(rows.numel(), 4, generator=torch.Generator().manual_seed(1))
    results = []
    for selected in (False, True):
        torch.manual_seed(0)
        net = GNN(model, 40, 16, 4, dropout=p, **kwargs)
        net.train()
        dropout_module.manual_seed(9)
        if selected:
            logits = net(problem.x, problem.graph, rows=rows)
        else:
            logits = net(problem.x, problem.graph).index_select(0, rows)
        logits.backward(grad)
        results.append((logits.detach(), [q.grad.clone() for q in net.parameters()]))
    (full, full_grads), (subset, subset_grads) = results
    assert subset.shape == (rows.numel(), 4)
    torch.testing.assert_close(subset, full, rtol=1e-5, atol=1e-5)
    for want, got in zip(full_grads, subset_grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_the_rows_blocks_are_built_once_per_rows_tensor():
    problem = _problem()
    graph = problem.graph
    rows = problem.masks["train"].nonzero().squeeze(1)
    x = torch.randn(graph.num_owned, 8, requires_grad=True)
    first = graph._row_blocks("gcn", rows)
    assert graph._row_blocks("gcn", rows) is first
    other = rows.clone()
    assert graph._row_blocks("gcn", other) is not first
    torch.testing.assert_close(graph.aggregate_rows(x, "gcn", rows),
                               graph.aggregate(x, "gcn").index_select(0, rows))
    # no gradient: the whole aggregate (which may be kept) selected
    torch.testing.assert_close(graph.aggregate_rows(x.detach(), "gcn", rows),
                               graph.aggregate(x.detach(), "gcn").index_select(0, rows))


def _check_narrowed_against_whole_layers(model: str, hidden: int, p: float, **kwargs):
    """A 2-layer ``model``'s logits of the training rows, its first layer computing only the
    rows those read, against the whole layers on the same draws (the input dropout's mask
    and the hidden mask drawn over the rows read, zeros elsewhere, which no loss row reads):
    the same logits and parameter gradients."""
    problem = _problem()
    graph, x = problem.graph, problem.x
    rows = problem.masks["train"].nonzero().squeeze(1)
    read = graph.rows_read_by(rows)
    grad = torch.randn(rows.numel(), 4, generator=torch.Generator().manual_seed(1))
    results = []
    for narrowed in (True, False):
        torch.manual_seed(0)
        net = GNN(model, 40, hidden, 4, dropout=p, **kwargs)
        net.train()
        dropout_module.manual_seed(9)
        if narrowed:
            logits = net(x, graph, rows=rows)
        else:  # the same draws, in the same order, on the whole layers
            first = net.layers[0](dropout_module.dropout(x, p), graph)
            hidden_rows = dropout_module.relu_dropout(first.index_select(0, read), p)
            spread = torch.zeros(graph.num_owned, hidden).index_copy(0, read, hidden_rows)
            logits = net.layers[1](spread, graph).index_select(0, rows)
        logits.backward(grad)
        results.append((logits.detach(), [q.grad.clone() for q in net.parameters()]))
    (subset, subset_grads), (whole, whole_grads) = results
    torch.testing.assert_close(subset, whole, rtol=1e-5, atol=1e-5)
    for want, got in zip(whole_grads, subset_grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("model, kwargs", [
    ("gcn", {}), ("sage", {}), ("gcn", {"order": "aggregate_first"}),
    ("sage", {"order": "aggregate_first"}),
])
def test_narrowed_rows_with_dropout_equal_the_whole_layers_on_the_mask_drawn(model, kwargs):
    """The first layer computes only the rows the last one reads; with dropout its ReLU and
    dropout run over those rows."""
    _check_narrowed_against_whole_layers(model, 16, 0.5, **kwargs)


def test_rows_read_are_the_rows_and_their_in_neighbours():
    problem = _problem()
    graph = problem.graph
    rows = problem.masks["train"].nonzero().squeeze(1)
    read = graph.rows_read_by(rows)
    indptr, indices = graph.view.indptr, graph.view.indices
    expected = set(rows.tolist())
    for r in rows.tolist():
        expected.update(int(c) for c in indices[indptr[r]:indptr[r + 1]])
    assert read.tolist() == sorted(expected)
    assert graph.rows_read_by(rows) is read  # kept per rows tensor
    every = torch.arange(graph.num_owned)
    assert graph.rows_read_by(every) is None  # nothing to narrow
    x = torch.randn(read.numel(), 8, requires_grad=True)
    spread = torch.zeros(graph.num_owned, 8).index_copy(0, read, x)
    torch.testing.assert_close(graph.aggregate_rows(x, "gcn", rows, read),
                               graph.aggregate_rows(spread, "gcn", rows))


@pytest.mark.parametrize("p", [0.0, 0.5])
def test_sage_first_layer_narrowed_forms_one_stacked_product(p, monkeypatch):
    """A SAGE first layer that aggregates first (40 -> 64) before one that transforms first
    gathers the rows read side by side (stacked_rows) and forms one product: the same logits
    and gradients as the whole layers (dropout 0: as the whole forward)."""
    from gnnscale.nn import conv

    calls = []
    real = conv.stacked_rows
    monkeypatch.setattr(conv, "stacked_rows", lambda *a: calls.append(1) or real(*a))
    _check_narrowed_against_whole_layers("sage", 64, p)
    assert calls  # the stacked product was formed
