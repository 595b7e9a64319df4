"""The Planetoid recipes' sparse first layer (gnnscale.recipes.sparse_input) computes what the
dense one does: same products and weight gradients, dropout only on stored values with the
dense dropout's scaling, and one CSR conversion per feature tensor."""

import torch
from torch import nn

from gnnscale.recipes.sparse_input import SparseInputLinear, as_csr, sparse_dropout


def _features():
    torch.manual_seed(0)
    return (torch.rand(50, 30) < 0.1).float() * torch.rand(50, 30)


def test_sparse_product_and_gradient_equal_dense():
    x = _features()
    dense = nn.Linear(30, 4, bias=False)
    sparse = SparseInputLinear(dense)
    assert sparse.weight is dense.weight
    out_sparse = sparse(as_csr(x))
    out_sparse.square().sum().backward()
    grad_sparse = dense.weight.grad.clone()
    dense.weight.grad = None
    out_dense = sparse(x)
    out_dense.square().sum().backward()
    torch.testing.assert_close(out_sparse, out_dense)
    torch.testing.assert_close(grad_sparse, dense.weight.grad)


def test_dropout_keeps_the_pattern_and_scales_kept_values():
    x = as_csr(_features())
    dropped = sparse_dropout(x, 0.5, training=True)
    assert torch.equal(dropped.col_indices(), x.col_indices())
    kept = dropped.values() != 0
    assert 0 < kept.sum() < x.values().numel()
    torch.testing.assert_close(dropped.values()[kept], x.values()[kept] * 2.0)
    assert sparse_dropout(x, 0.5, training=False) is x


def test_conversion_is_cached_until_the_tensor_changes():
    x = _features()
    first = as_csr(x)
    assert as_csr(x) is first
    x[0, 0] = 5.0
    again = as_csr(x)
    assert again is not first and again.to_dense()[0, 0] == 5.0


def test_a_biased_linear_map_is_refused():
    try:
        SparseInputLinear(nn.Linear(3, 2))
    except ValueError as exc:
        assert "bias-free" in str(exc)
    else:
        raise AssertionError("expected ValueError")
