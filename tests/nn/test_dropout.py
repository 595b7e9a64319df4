"""The hash-mask dropout and the fused ReLU + dropout (gnnscale/nn/dropout.py)."""

import numba
import pytest
import torch

from gnnscale.nn import dropout as d


def _seeded(fn, seed, *args):
    d.manual_seed(seed)
    return fn(*args)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_rate_and_scale_match_p(p):
    x = torch.ones(512, 1000)
    out = _seeded(d.dropout, 0, x, p)
    kept = out != 0
    assert abs(kept.float().mean().item() - (1 - p)) < 0.005
    scale = out[kept].unique()
    assert scale.numel() == 1 and abs(scale.item() - 1 / (1 - p)) < 1e-3
    assert abs(out.mean().item() - 1.0) < 0.02  # expectation kept


@pytest.mark.parametrize("n", [1, 3, 4095, 4096, 4097, 12289])
def test_relu_dropout_is_dropout_of_relu_with_the_same_mask(n):
    x = torch.randn(n, dtype=torch.float64)
    fused = _seeded(d.relu_dropout, 7, x, 0.3)
    plain = _seeded(d.dropout, 7, torch.relu(x), 0.3)
    assert torch.equal(fused, plain)


def test_gradients_are_the_mask_times_the_scale():
    x = torch.randn(300, 17, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(300, 17, dtype=torch.float64)
    out = _seeded(d.dropout, 3, x, 0.4)
    out.backward(grad)
    keep = (out != 0) | (x == 0)
    assert torch.equal(x.grad, torch.where(keep, grad * (65536 / (65536 - 26214)),
                                           torch.zeros_like(grad)))
    x.grad = None
    out = _seeded(d.relu_dropout, 3, x, 0.4)
    out.backward(grad)
    expected = torch.where(out > 0, grad * (65536 / (65536 - 26214)), torch.zeros_like(grad))
    assert torch.equal(x.grad, expected)
    assert torch.all(x.grad[x <= 0] == 0)


def test_masks_do_not_depend_on_the_thread_count():
    x = torch.randn(1000, 300)
    previous = numba.get_num_threads()
    try:
        outs = []
        for threads in (1, numba.config.NUMBA_NUM_THREADS):
            numba.set_num_threads(threads)
            outs.append(_seeded(d.relu_dropout, 11, x, 0.5))
    finally:
        numba.set_num_threads(previous)
    assert torch.equal(outs[0], outs[1])


def test_state_round_trip_and_fresh_masks_per_call():
    x = torch.randn(64, 64)
    d.manual_seed(5)
    state = d.get_state()
    first, second = d.dropout(x, 0.5), d.dropout(x, 0.5)
    assert not torch.equal(first, second)
    d.set_state(state)
    assert torch.equal(d.dropout(x, 0.5), first)


def test_other_dtypes_use_the_same_mask_and_eval_is_identity():
    x = torch.randn(100, 50)
    compiled = _seeded(d.dropout, 9, x, 0.5)
    fallback = _seeded(d.dropout, 9, x.to(torch.bfloat16), 0.5)
    assert torch.equal(compiled != 0, fallback != 0)
    fused = _seeded(d.relu_dropout, 9, x.to(torch.bfloat16), 0.5)
    assert torch.equal(fused != 0, _seeded(d.relu_dropout, 9, x, 0.5) != 0)
    assert d.dropout(x, 0.5, training=False) is x
    assert torch.equal(d.relu_dropout(x, 0.5, training=False), torch.relu(x))
    with pytest.raises(ValueError, match="dropout probability"):
        d.dropout(x, 1.0)
