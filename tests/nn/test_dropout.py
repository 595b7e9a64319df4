"""The hash-mask dropout and the fused ReLU + dropout (gnnscale/nn/dropout.py)."""

import numba
import numpy as np
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


@pytest.mark.parametrize("relu", [False, True])
def test_bf16_rows_in_one_pass_equal_float32_then_cast(relu):
    fn = d.relu_dropout if relu else d.dropout
    x = torch.randn(300, 70).to(torch.bfloat16)
    reference = _seeded(fn, 4, x.float(), 0.3).to(torch.bfloat16)
    half = _seeded(fn, 4, x, 0.3)  # bf16 in, bf16 out
    cast = _seeded(fn, 4, x.float(), 0.3, True, torch.bfloat16)  # float32 in, bf16 out
    assert half.dtype == cast.dtype == torch.bfloat16
    assert torch.equal(half, reference) and torch.equal(cast, reference)


@pytest.mark.parametrize("relu", [False, True])
def test_gradients_come_back_in_the_input_dtype(relu):
    fn = d.relu_dropout if relu else d.dropout
    scale = 65536 / (65536 - 19661)
    grad = torch.randn(300, 70).to(torch.bfloat16)
    for dtype in (torch.bfloat16, torch.float32):
        x = torch.randn(300, 70).to(dtype).requires_grad_()
        out = _seeded(fn, 6, x, 0.3, True, torch.bfloat16)
        out.backward(grad)
        assert x.grad.dtype == dtype
        kept = (out != 0) if relu else (_seeded(d.dropout, 6, torch.ones(300, 70), 0.3) != 0)
        expected = torch.where(kept, grad.float() * scale, torch.zeros(()))
        torch.testing.assert_close(x.grad.float(), expected.to(dtype).float(), rtol=0, atol=0)


def test_nothing_dropped_returns_the_input_itself_whatever_the_dtype_asked():
    x = torch.randn(20, 40)
    assert d.dropout(x, 0.0, dtype=torch.bfloat16) is x
    assert d.dropout(x, 0.5, training=False, dtype=torch.bfloat16) is x
    assert d.relu_dropout(x, 0.0, dtype=torch.bfloat16).dtype == torch.bfloat16


@pytest.mark.parametrize("numel", [1, 3, 4, 5, 4097, 100_003])
def test_the_torch_mask_is_the_compiled_kernels_mask(monkeypatch, numel):
    """keep_mask_on (GPU tensors) draws the compiled kernel's mask bit for bit, also when its
    hashes take several passes."""
    monkeypatch.setattr(d, "MASK_HASHES_PER_PASS", 1000)
    for p in (0.1, 0.5, 0.9):
        key, threshold, _ = _seeded(d.draw, 13, p)
        compiled = d._keep_mask(numel, key, threshold, np.empty(numel, np.bool_))
        assert np.array_equal(d.keep_mask_on(numel, key, threshold, "cpu").numpy(), compiled)


@pytest.mark.parametrize("rows, width, first_chunk", [
    (2048, 256, 0), (16, 256, 3), (37, 100, 0), (1000, 100, 5), (5, 5000, 2), (300, 7, 1),
    (1, 1, 0), (4096, 1, 0)])
def test_the_transposed_gradient_is_the_gradient_transposed(rows, width, first_chunk):
    """relu_dropout_grad given out_t stores element (r, c) at [c, r], the same values (and
    the same recomputed activation) as by rows, for widths that divide the mask's chunks, do
    not, or exceed them."""
    gen = np.random.default_rng(rows * width)
    grad, x = (gen.standard_normal(rows * width).astype(np.float32) for _ in range(2))
    bias = d.tiled_bias(gen.standard_normal(width).astype(np.float32))
    key, threshold, scale = d.draw(0.4)
    scale = np.float32(scale)
    by_rows, values = np.empty(rows * width, np.float32), np.empty(rows * width, np.float32)
    d.relu_dropout_grad(grad, x, bias, key, threshold, scale, by_rows, values, first_chunk,
                        d.NOT_TRANSPOSED)
    transposed = np.full((width, rows), np.nan, np.float32)
    values_t = np.empty(rows * width, np.float32)
    d.relu_dropout_grad(grad, x, bias, key, threshold, scale, np.empty(0, np.float32),
                        values_t, first_chunk, transposed)
    np.testing.assert_array_equal(transposed, by_rows.reshape(rows, width).T)
    np.testing.assert_array_equal(values_t, values)
    kept = np.count_nonzero(by_rows)
    assert 0 < kept < rows * width or rows * width < 50
