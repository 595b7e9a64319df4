"""``weighted_sum``: the per-edge messages formed a chunk at a time equal the gather-multiply-
scatter they replace, forward and backward, whatever the chunk size and weight layout."""

import pytest
import torch

from gnnscale.nn import edge_ops
from gnnscale.nn.edge_ops import scatter_sum, weighted_sum


def _case(rows_count, heads, width, edges, num_rows, head_last, seed=0):
    gen = torch.Generator().manual_seed(seed)
    # the source rows are a strided view, as GAT's (values, then attention terms, per row)
    base = torch.randn(rows_count, heads * width + heads, dtype=torch.float64, generator=gen,
                       requires_grad=True)
    weights = torch.rand(edges, heads, dtype=torch.float64, generator=gen, requires_grad=True)
    src = torch.randint(0, max(rows_count, 1), (edges,), generator=gen)
    dst = torch.randint(0, num_rows, (edges,), generator=gen)

    def rows_and_weights(b, w):
        if head_last:  # [R, C, H] with one weight per head broadcast over C
            return b[:, :heads * width].view(-1, width, heads), w.unsqueeze(1)
        return b[:, :heads * width].view(-1, heads, width), w.unsqueeze(-1)
    return base, weights, src, dst, rows_and_weights


@pytest.mark.parametrize("chunk_bytes", [edge_ops.CHUNK_BYTES, 64, 1])
@pytest.mark.parametrize("head_last", [False, True])
def test_weighted_sum_equals_gather_multiply_scatter(monkeypatch, chunk_bytes, head_last):
    monkeypatch.setattr(edge_ops, "CHUNK_BYTES", chunk_bytes)
    base, weights, src, dst, split = _case(40, 3, 4, 500, 25, head_last)
    rows, w = split(base, weights)
    out = weighted_sum(rows, w, src, dst, 25)
    reference = scatter_sum(w * rows.index_select(0, src), dst, 25)
    assert out.shape == (25, *rows.shape[1:])
    assert torch.equal(out, reference)  # the same sums in the same order
    grad = torch.randn_like(out)
    ours = torch.autograd.grad(out, (base, weights), grad)
    theirs = torch.autograd.grad(reference, (base, weights), grad)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_weighted_sum_gradcheck_and_empty_inputs(monkeypatch):
    monkeypatch.setattr(edge_ops, "CHUNK_BYTES", 100)
    base, weights, src, dst, split = _case(12, 2, 3, 60, 7, False, seed=1)
    assert torch.autograd.gradcheck(
        lambda b, w: weighted_sum(*split(b, w), src, dst, 7), (base, weights))
    base, weights, src, dst, split = _case(0, 2, 3, 0, 5, False)
    out = weighted_sum(*split(base, weights), src, dst, 5)
    assert out.shape == (5, 2, 3) and not out.any()
    out.sum().backward()
    assert base.grad.shape == base.shape and weights.grad.shape == weights.shape


def test_weighted_sum_gradient_only_where_asked():
    base, weights, src, dst, split = _case(10, 2, 2, 30, 6, False, seed=2)
    rows, w = split(base.detach(), weights)  # no gradient for the rows
    weighted_sum(rows, w, src, dst, 6).sum().backward()
    assert weights.grad is not None and torch.isfinite(weights.grad).all()
