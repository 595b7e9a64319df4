"""``linear_sum`` equals the sum of ``F.linear`` products, forward and backward, whichever
inputs need gradients; it refuses mismatched lists and stays out of CPU autocast."""

import pytest
import torch
from torch.nn import functional as F

from gnnscale.nn.tall_linear import can_use, linear_sum


@pytest.mark.parametrize("count", [1, 2, 3])
@pytest.mark.parametrize("needs", ["all", "weights only", "inputs only"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_equals_the_sum_of_linear_maps(count, needs, dtype):
    gen = torch.Generator().manual_seed(count)
    rows, out = 700, 9
    widths = [5, 12, 1][:count]
    inputs = [torch.randn(rows, w, generator=gen, dtype=dtype).requires_grad_(
        needs != "weights only") for w in widths]
    weights = [torch.randn(out, w, generator=gen, dtype=dtype).requires_grad_(
        needs != "inputs only") for w in widths]
    grad = torch.randn(rows, out, generator=gen, dtype=dtype)
    leaves = [t for t in inputs + weights if t.requires_grad]
    reference = sum(F.linear(x, w) for x, w in zip(inputs, weights))
    expected = torch.autograd.grad(reference, leaves, grad)
    result = linear_sum(inputs, weights)
    torch.testing.assert_close(result, reference)
    got = torch.autograd.grad(result, leaves, grad)
    # a weight's gradient sums 700 products (magnitude ~25) in another order than F.linear's
    # backward: float32 rounding reaches a few 1e-5 there (seen 2.9e-5 on AMD EPYC with MKL)
    tolerance = {"rtol": 1e-5, "atol": 1e-4} if dtype == torch.float32 else {}
    for g, want, leaf in zip(got, expected, leaves):
        assert g.shape == leaf.shape
        torch.testing.assert_close(g, want, **tolerance)


def test_trains_a_parameter_like_linear():
    layer = torch.nn.Linear(6, 4, bias=False)
    x = torch.randn(50, 6)
    linear_sum([x], [layer.weight]).square().sum().backward()
    got = layer.weight.grad.clone()
    layer.weight.grad = None
    F.linear(x, layer.weight).square().sum().backward()
    torch.testing.assert_close(got, layer.weight.grad)


def test_mismatched_lists_are_refused():
    with pytest.raises(ValueError, match="as many weights as inputs.*2 inputs and 1 weights"):
        linear_sum([torch.ones(2, 2), torch.ones(2, 2)], [torch.ones(3, 2)])
    with pytest.raises(ValueError, match="at least one"):
        linear_sum([], [])


def test_only_outside_autocast_and_for_float32_or_64():
    assert can_use(torch.ones(2, 2)) and can_use(torch.ones(2, 2, dtype=torch.float64))
    assert not can_use(torch.ones(2, 2, dtype=torch.bfloat16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not can_use(torch.ones(2, 2))
