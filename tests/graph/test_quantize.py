"""Quantized halo rows (gnnscale/graph/quantize.py): the error bound of each width, unbiased
stochastic rounding, bit packing, determinism, and the bytes a plan counts on the wire."""

import numpy as np
import pytest
import torch

from gnnscale.comm import SingleCommunicator
from gnnscale.graph.halo import HaloPlan, gradient_wire
from gnnscale.graph.quantize import (GOLDEN, META_BYTES, WIRE_FORMATS, QuantizedWire, _mix,
                                     exchange_key, splitmix64)

WIRES = list(WIRE_FORMATS.values())


def _meta(wire: QuantizedWire, data: torch.Tensor, width: int) -> np.ndarray:
    """[n, 2] float32 (scale, offset) of encoded rows."""
    return np.ascontiguousarray(data.numpy()[:, wire.code_bytes(width):]).view(np.float32)


def _round_trip(wire, rows, key=7, dtype=None):
    data = wire.encode(rows, key)
    return data, wire.decode(data, tuple(rows.shape[1:]), dtype or rows.dtype)


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.name)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_error_is_at_most_one_step_per_element(wire, dtype):
    gen = torch.Generator().manual_seed(0)
    # rows of very different ranges: the scale is per row
    rows = (torch.randn(300, 37, generator=gen)
            * torch.logspace(-3, 3, 300).unsqueeze(1)).to(dtype)
    data, back = _round_trip(wire, rows)
    assert data.dtype == torch.uint8 and data.shape == (300, wire.row_bytes(37))
    assert back.dtype == dtype and back.shape == rows.shape
    scale, offset = _meta(wire, data, 37).T
    x = rows.double()
    np.testing.assert_array_equal(offset, x.min(1).values.float().numpy())
    np.testing.assert_allclose(scale, ((x.max(1).values - x.min(1).values)
                                       / (2 ** wire.bits - 1)).numpy(), rtol=1e-6)
    # one step, plus the rounding of the result to its dtype (bf16: 2^-8 relative)
    rel = {torch.float32: 2e-7, torch.float64: 2e-7, torch.bfloat16: 2 ** -8}[dtype]
    bound = torch.from_numpy(scale).double().unsqueeze(1) * (1 + 1e-6) + rel * x.abs()
    assert ((x - back.double()).abs() <= bound).all()


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.name)
def test_rounding_is_unbiased(wire):
    """Mean error over many keys -> 0: each draw's error has mean 0 and spread at most half a
    step, so the mean of N draws is within 5 * scale / (2 sqrt(N)) of 0 for every element
    (5 standard deviations; 600 elements), far below the up-to-one-step error of one draw."""
    gen = torch.Generator().manual_seed(1)
    rows = torch.randn(20, 30, generator=gen)
    draws = 4000
    total = torch.zeros(20, 30, dtype=torch.float64)
    for key in range(draws):
        total += wire.decode(wire.encode(rows, exchange_key(3, 0, key)), (30,),
                             torch.float64)
    scale = torch.from_numpy(_meta(wire, wire.encode(rows, 0), 30)[:, 0]).double()
    error = total / draws - rows.double()
    assert (error.abs() <= 5 * scale.unsqueeze(1) / (2 * draws ** 0.5)).all()
    # and round-to-nearest would not pass: the bound is tight enough to see a bias
    assert (5 / (2 * draws ** 0.5)) < 0.1


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.name)
@pytest.mark.parametrize("width", [1, 2, 3, 5, 7, 13, 64])
def test_every_code_packs_and_unpacks_exactly(wire, width):
    """Rows on the grid (offset 0, scale 1: values 0 .. 2^b - 1) are exact (t is an integer,
    floor(t + u) = t); every code appears, in every slot of a byte, odd widths included."""
    levels = 2 ** wire.bits - 1
    n = 16 * (levels + 1)
    rows = torch.zeros(n, width)
    inner = max(width - 2, 0)   # the columns between a row's pinned 0 and 2^b - 1
    rows[:, 1:1 + inner] = torch.randint(0, levels + 1, (n, inner),
                                         generator=torch.Generator().manual_seed(width)).float()
    rows[:, -1] = levels
    if width == 1:
        rows[:, 0] = (torch.arange(n) % (levels + 1)).float()  # one value: scale 0, exact
    data, back = _round_trip(wire, rows, key=12345)
    assert data.shape[1] == -(-width * wire.bits // 8) + META_BYTES
    assert torch.equal(back, rows)
    per_byte = 8 // wire.bits
    for slot in range(per_byte):  # every code in every slot of a byte (where a slot is free)
        columns = [c for c in range(1, width - 1) if c % per_byte == slot]
        if columns:
            assert set(rows[:, columns].flatten().tolist()) == set(map(float, range(levels + 1)))


def test_same_key_same_bits_other_key_other_bits():
    rows = torch.randn(64, 16, generator=torch.Generator().manual_seed(2))
    for wire in WIRES:
        a, b = wire.encode(rows, 99), wire.encode(rows, 99)
        assert torch.equal(a, b)
        assert not torch.equal(a, wire.encode(rows, 100))


def test_keys_differ_by_seed_rank_and_counter():
    keys = {exchange_key(s, r, c) for s in range(3) for r in range(4) for c in range(50)}
    assert len(keys) == 3 * 4 * 50
    assert exchange_key(1, 2, 3) == exchange_key(1, 2, 3)


def test_python_mix_matches_compiled_splitmix64():
    for z in (0, 1, 2 ** 63 + 5, int(GOLDEN)):
        assert _mix(z) == int(splitmix64(np.uint64(z)))


def test_constant_rows_are_exact_and_non_finite_rows_arrive_as_nan():
    rows = torch.tensor([[2.5, 2.5, 2.5], [1.0, float("inf"), 0.0], [0.0, float("nan"), 1.0],
                         [-1.0, 0.0, 1.0]])
    for wire in WIRES:
        _, back = _round_trip(wire, rows)
        assert torch.equal(back[0], rows[0])
        assert torch.isnan(back[1]).all() and torch.isnan(back[2]).all()
        assert torch.isfinite(back[3]).all()


def test_no_rows_and_three_dimensional_rows():
    for wire in WIRES:
        data, back = _round_trip(wire, torch.zeros(0, 8))
        assert data.shape == (0, wire.row_bytes(8)) and back.shape == (0, 8)
        rows = torch.randn(5, 2, 3)  # e.g. attention heads
        _, back = _round_trip(wire, rows)
        assert back.shape == (5, 2, 3)


def test_bad_bits_refused():
    with pytest.raises(ValueError, match="8, 4 or 2 bits"):
        QuantizedWire(3)


def _plan(rows: int) -> HaloPlan:
    return HaloPlan(comm=SingleCommunicator(), num_owned=rows, num_halo=rows,
                    send_index=torch.arange(rows), send_counts=[rows], recv_counts=[rows])


@pytest.mark.parametrize("name,row_bytes", [("float32", 16 * 4), ("bfloat16", 16 * 2),
                                            ("int8", 16 + 8), ("int4", 8 + 8),
                                            ("int2", 4 + 8)])
def test_plan_counts_the_bytes_on_the_wire(name, row_bytes):
    """float32 sends its 4 bytes per value as it always did; the others their wire rows."""
    plan = _plan(10)
    dtype = WIRE_FORMATS.get(name) or getattr(torch, name)
    plan.configure(message_dtype=None if name == "float32" else dtype)
    owned = torch.randn(10, 16)
    halo = plan.wait(plan.post_forward(owned))
    assert plan.stats.halo_bytes_sent == 10 * row_bytes and plan.stats.exchanges == 1
    assert halo.dtype == torch.float32 and halo.shape == (10, 16)
    if name == "float32":
        assert torch.equal(halo, owned)
    else:
        assert (halo - owned).abs().max() <= (owned.max() - owned.min()) / 3


def test_gradients_travel_at_the_rows_width_unless_set():
    for wire in (QuantizedWire(2), QuantizedWire(4), QuantizedWire(8), torch.bfloat16, None):
        assert gradient_wire(wire) == wire
    plan = _plan(4).configure(message_dtype=QuantizedWire(2))
    plan.wait(plan.post_backward(torch.randn(4, 16)))
    assert plan.stats.halo_bytes_sent == 4 * (4 + 8)
    plan.configure(gradient_dtype=QuantizedWire(8))
    assert plan.wire_dtype(gradient=True) == QuantizedWire(8)
    assert plan.wire_dtype(gradient=False) == QuantizedWire(2)
    plan.wait(plan.post_backward(torch.randn(4, 16)))
    assert plan.stats.halo_bytes_sent == 4 * (4 + 8) + 4 * (16 + 8)
    with pytest.raises(ValueError, match="gradient_dtype"):
        plan.configure(gradient_dtype="int2")


def test_quantized_exchanges_are_reproducible_and_each_draws_anew():
    owned = torch.randn(50, 16, generator=torch.Generator().manual_seed(4))
    runs = []
    for _ in range(2):
        plan = _plan(50).configure(message_dtype=QuantizedWire(2), quantize_seed=11)
        runs.append([plan.wait(plan.post_forward(owned)) for _ in range(3)])
    for a, b in zip(*runs):
        assert torch.equal(a, b)
    assert not torch.equal(runs[0][0], runs[0][1])  # the counter moved: fresh rounding


def test_cli_refuses_quantized_halos_on_cuda(tmp_path):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "gnnscale", "train", "--dataset", "cora",
                             "--halo-dtype", "int4", "--device", "cuda"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 2
    assert "--halo-dtype int4 is not supported on cuda yet" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
