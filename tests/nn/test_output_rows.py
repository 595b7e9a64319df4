"""Training's logits of the loss's rows only: ``GNN(x, graph, rows)`` equals the full forward's
rows ``rows``, values and gradients, whether the last layer computes only those rows (GCN,
SAGE mean/sum: its aggregation reads only their edges) or every row and selects (GAT, SAGE-max,
residual models). The trainer asks for the training rows this way; its launches on several
ranks are checked against one process in tests/engine."""

import numpy as np
import pytest
import torch

from gnnscale.comm import SingleCommunicator
from gnnscale.data import generate_sbm
from gnnscale.engine import LocalProblem
from gnnscale.nn import GNN
from gnnscale.nn import dropout as dropout_module


def _problem():
    data = generate_sbm(num_nodes=400, num_classes=4, avg_degree=8.0, num_features=40,
                        train_per_class=20, num_val=40, num_test=40, seed=5)
    return LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64),
                                        SingleCommunicator())


@pytest.mark.parametrize("model, kwargs", [
    ("gcn", {}), ("sage", {}), ("gcn", {"order": "aggregate_first"}),
    ("sage", {"order": "aggregate_first"}), ("sage-max", {}), ("gat", {"heads": 2}),
    ("gcn", {"residual": True}), ("gcn", {"num_layers": 1}), ("sage", {"num_layers": 3}),
])
@pytest.mark.parametrize("p", [0.5, 0.0])
def test_rows_equal_the_full_forward_selected(model, kwargs, p):
    problem = _problem()
    rows = problem.masks["train"].nonzero().squeeze(1)
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
