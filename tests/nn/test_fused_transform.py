"""ReLU, dropout and the next transform a block of rows at a time (with the previous layer's
bias added in the same pass) equal the unfused pair.

The fused product draws its mask as :func:`gnnscale.nn.dropout.relu_dropout` does (same key
from the same generator state, element by element), so outputs and gradients match the pair
``F.linear(relu_dropout(h), W)`` up to the products' rounding; and a GNN gives the same logits
and gradients with the fusion on or off.
"""

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from gnnscale.comm import SingleCommunicator
from gnnscale.data import generate_sbm
from gnnscale.engine import LocalProblem
from gnnscale.nn import GNN, gemm
from gnnscale.nn import dropout as dropout_module
from gnnscale.nn.dropout import CHUNK
from gnnscale.nn.fused_transform import (PendingLinear, block_rows, can_fuse,
                                         relu_dropout_linear)

GEMM_BACKENDS = [pytest.param("onednn", marks=pytest.mark.skipif(
    gemm._onednn_linear() is None, reason="this build of torch has no oneDNN")), "torch"]


@pytest.fixture(autouse=True, params=GEMM_BACKENDS)
def gemm_backend(request):
    """Every case through oneDNN's products (the pre-activation's gradient kept transposed
    per block) and through torch's (kept by rows)."""
    gemm.set_backend(request.param)
    yield request.param
    gemm.set_backend(None)


@pytest.mark.parametrize("rows, width, out, p", [
    (3000, 256, 16, 0.5),   # several blocks, the last one partial
    (5000, 100, 7, 0.3),    # width not dividing the mask's chunk
    (12000, 100, 5, 0.5),   # the same over several blocks (a bias row starts mid-chunk)
    (333, 7, 3, 0.0),       # ReLU alone, one block smaller than a chunk
    (1, 5, 2, 0.5),
    (0, 8, 3, 0.5),         # a rank that owns no rows
])
@pytest.mark.parametrize("needs, with_bias", [
    (needs, False) for needs in ("both", "input only", "weight only")
] + [(needs, True) for needs in ("both", "input only", "weight only", "bias only")])
def test_equals_relu_dropout_then_linear(rows, width, out, p, needs, with_bias):
    gen = torch.Generator().manual_seed(rows)
    h = torch.randn(rows, width, generator=gen).requires_grad_(needs in ("both", "input only"))
    weight = torch.randn(out, width, generator=gen).requires_grad_(
        needs in ("both", "weight only"))
    bias = (torch.randn(width, generator=gen).requires_grad_(needs in ("both", "bias only"))
            if with_bias else None)
    grad = torch.randn(rows, out, generator=gen)
    leaves = (h, weight) if bias is None else (h, weight, bias)
    dropout_module.manual_seed(7)
    reference = F.linear(dropout_module.relu_dropout(h if bias is None else h + bias, p, True),
                         weight)
    reference.backward(grad)
    expected = [t.grad.clone() if t.requires_grad else None for t in leaves]
    state_after_reference = dropout_module.get_state()
    for tensor in leaves:
        tensor.grad = None
    dropout_module.manual_seed(7)
    fused = relu_dropout_linear(h, weight, p, True, bias)
    fused.backward(grad)
    assert dropout_module.get_state() == state_after_reference  # the same draws
    torch.testing.assert_close(fused, reference, rtol=1e-5, atol=1e-5)
    _assert_gradients(leaves, expected, atol=1e-4)


def _assert_gradients(leaves, expected, atol):
    """Each leaf's gradient as expected (None: the leaf got none). Sums over rows (W', the
    bias's gradient): float32 rounding grows with the rows."""
    for tensor, want in zip(leaves, expected):
        if want is None:
            assert tensor.grad is None
        else:
            torch.testing.assert_close(tensor.grad, want, rtol=1e-4, atol=atol)


@pytest.mark.parametrize("rows, widths, hidden, out, p", [
    (3000, (24,), 256, 16, 0.5),      # GCN's first layer: the aggregate times its weight
    (5000, (24, 24), 100, 7, 0.3),    # SAGE's: aggregate and root, a width not dividing chunks
    (1, (3, 5), 8, 2, 0.5),
    (0, (4,), 8, 3, 0.5),             # a rank that owns no rows
])
@pytest.mark.parametrize("input_grads", [False, True])
def test_a_pending_product_equals_forming_it_first(rows, widths, hidden, out, p, input_grads):
    """The previous layer's products formed inside the pass: the same output and gradients
    (inputs', weights', bias's, the next weight's) as forming ``h`` and then the pass."""
    gen = torch.Generator().manual_seed(rows + len(widths))
    inputs = [torch.randn(rows, w, generator=gen).requires_grad_(input_grads) for w in widths]
    weights = [torch.randn(hidden, w, generator=gen).requires_grad_() for w in widths]
    bias = torch.randn(hidden, generator=gen).requires_grad_()
    weight = torch.randn(out, hidden, generator=gen).requires_grad_()
    grad = torch.randn(rows, out, generator=gen)
    leaves = [*inputs, *weights, bias, weight]
    dropout_module.manual_seed(3)
    h = sum(F.linear(x, w) for x, w in zip(inputs, weights))
    reference = F.linear(dropout_module.relu_dropout(h + bias, p, True), weight)
    reference.backward(grad)
    expected = [t.grad.clone() if t.requires_grad else None for t in leaves]
    for tensor in leaves:
        tensor.grad = None
    dropout_module.manual_seed(3)
    pending = PendingLinear(inputs, weights)
    assert can_fuse(pending)
    fused = relu_dropout_linear(pending, weight, p, True, bias)
    fused.backward(grad)
    torch.testing.assert_close(fused, reference, rtol=1e-4, atol=1e-4)
    _assert_gradients(leaves, expected, atol=1e-3)
    torch.testing.assert_close(pending.materialize(), h)


def test_a_pending_product_needs_a_weight_per_input():
    with pytest.raises(ValueError, match="as many weights as inputs"):
        PendingLinear([torch.ones(2, 2)], [])
    assert not can_fuse(PendingLinear([torch.ones(2, 2, dtype=torch.float64)],
                                      [torch.ones(3, 2, dtype=torch.float64)]))


def test_evaluation_is_relu_alone_and_draws_nothing():
    h, weight = torch.randn(100, 12), torch.randn(4, 12)
    state = dropout_module.get_state()
    torch.testing.assert_close(relu_dropout_linear(h, weight, 0.5, training=False),
                               F.linear(F.relu(h), weight))
    assert dropout_module.get_state() == state


@pytest.mark.parametrize("width", [1, 7, 100, 256, 4096, 5000])
def test_blocks_start_on_a_chunk_of_the_mask(width):
    rows = block_rows(width)
    assert rows >= 1 and rows * width % CHUNK == 0


def test_only_float32_on_the_cpu_without_autocast():
    assert can_fuse(torch.ones(2, 2))
    assert not can_fuse(torch.ones(2, 2, dtype=torch.float64))
    assert not can_fuse(torch.ones(2, 2, dtype=torch.bfloat16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not can_fuse(torch.ones(2, 2))


@pytest.mark.parametrize("model, layers", [("gcn", 2), ("sage", 2), ("gcn", 3), ("sage", 3)])
@pytest.mark.parametrize("p", [0.5, 0.0])
@pytest.mark.parametrize("hidden", [32, 64])  # the first layer transforms / aggregates first
def test_gnn_is_the_same_with_and_without_the_fusion(model, layers, p, hidden, monkeypatch):
    from gnnscale.nn import conv

    calls = []
    monkeypatch.setattr(conv, "relu_dropout_linear",
                        lambda *args: calls.append(args[4] is not None)
                        or relu_dropout_linear(*args))
    data = generate_sbm(num_nodes=400, num_classes=4, avg_degree=8.0, num_features=40,
                        train_per_class=20, num_val=40, num_test=40, seed=3)
    graph = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64),
                                         SingleCommunicator()).graph
    x = torch.from_numpy(data.x)
    torch.manual_seed(0)
    net = GNN(model, data.num_features, hidden, 4, num_layers=layers, dropout=p)
    assert net.layers[0].transform_first == (hidden <= data.num_features)
    results = []
    for fuse in (True, False):
        net.fuse_activation = fuse
        net.zero_grad()
        dropout_module.manual_seed(11)
        logits = net(x, graph)
        (logits * torch.linspace(-1, 1, logits.numel()).view_as(logits)).sum().backward()
        results.append((logits.detach(), {n: q.grad.clone() for n, q in net.named_parameters()}))
    # every layer after the first, in the fused pass only; the first layer's bias rides in
    # the second's pass, later biases are added where their layer aggregates
    assert calls == [True] + [False] * (layers - 2)
    (fused, fused_grads), (plain, plain_grads) = results
    torch.testing.assert_close(fused, plain, rtol=1e-5, atol=1e-5)
    assert fused_grads.keys() == plain_grads.keys()
    for name in plain_grads:
        torch.testing.assert_close(fused_grads[name], plain_grads[name], rtol=1e-4, atol=1e-5)


def test_stacked_rows_are_the_two_gathers_side_by_side():
    from gnnscale.nn.stacked_rows import stacked_rows

    a, b = torch.randn(50, 7), torch.randn(50, 3)
    rows = torch.tensor([49, 0, 3, 3, 17])
    assert torch.equal(stacked_rows(a, b, rows), torch.cat([a[rows], b[rows]], dim=1))
    with pytest.raises(ValueError, match="no gradient"):
        stacked_rows(a.requires_grad_(), b, rows)
