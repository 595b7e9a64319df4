"""gnnscale.nn.gemm: products through oneDNN equal torch's to float32 rounding in every layout
the engine passes (transposed and sliced views, accumulation, tall reductions), and only large
float32 CPU products outside autograd's recording go there."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from gnnscale.errors import UsageError
from gnnscale.nn import gemm

ONEDNN = gemm._onednn_linear() is not None
BACKENDS = [pytest.param("onednn", marks=pytest.mark.skipif(
    not ONEDNN, reason="this build of torch has no oneDNN")), "torch"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    used = gemm.set_backend(request.param)
    assert used == (request.param == "onednn")
    yield request.param
    gemm.set_backend(None)


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal to the float64 product up to float32 rounding of a sum of a few hundred terms."""
    assert got.dtype == torch.float32 and got.shape == want.shape
    scale = want.abs().max().clamp_min(1.0)
    assert (got.double() - want).abs().max() / scale < 1e-5


def _views(generator):
    """(name, a, b) of the layouts the engine multiplies, ``a @ b`` large enough for oneDNN."""
    base = torch.randn(700, 600, generator=generator)
    wide = torch.randn(300, 520, generator=generator)
    return [
        ("contiguous", base[:, :256].contiguous(), wide[:256, :64].contiguous()),
        ("weight transposed", base[:, :300], wide[:, :48].t().t()[:300]),
        ("b as a transposed view", base[:, :256], wide[:64, :256].t()),
        ("a transposed", base[:, :512].t(), torch.randn(700, 40, generator=generator)),
        ("column slices", base[:, 100:356], wide[:256, 200:264]),
        ("row slice", base[128:640, :256], wide[:256, :64]),
    ]


def test_mm_equals_the_float64_product_in_every_layout(backend):
    generator = torch.Generator().manual_seed(0)
    for name, a, b in _views(generator):
        want = a.double() @ b.double()
        _close(gemm.mm(a, b), want)
        out = torch.full((a.shape[0], b.shape[1]), float("nan"))
        assert gemm.mm(a, b, out=out) is out, name
        _close(out, want)
        scratch = torch.empty(a.shape[0], b.shape[1])
        _close(gemm.mm(a, b, scratch=scratch), want)


def test_addmm_adds_to_c_and_leaves_c_as_it_was(backend):
    generator = torch.Generator().manual_seed(1)
    for name, a, b in _views(generator):
        c = torch.randn(a.shape[0], b.shape[1], generator=generator)
        before = c.clone()
        _close(gemm.addmm(c, a, b), c.double() + a.double() @ b.double())
        assert torch.equal(c, before), name


@pytest.mark.parametrize("rows", [1, gemm.ADD_BLOCK_ROWS, 2 * gemm.ADD_BLOCK_ROWS + 5])
def test_addmm_in_place_adds_every_block(backend, rows):
    generator = torch.Generator().manual_seed(3)
    a = torch.randn(rows, 600, generator=generator)[:, 44:300]
    b = torch.randn(64, 256, generator=generator).t()
    c = torch.randn(rows, 64, generator=generator)
    want = c.double() + a.double() @ b.double()
    assert gemm.addmm_(c, a, b) is c
    _close(c, want)


@pytest.mark.parametrize("rows", [0, 5, gemm.TALL_BLOCK_ROWS, 2 * gemm.TALL_BLOCK_ROWS + 77])
def test_mm_tn_sums_row_blocks_to_the_whole_product(backend, rows):
    generator = torch.Generator().manual_seed(2)
    a = torch.randn(rows, 256, generator=generator)
    b = torch.randn(rows, 3 * 96, generator=generator)[:, ::3]  # a strided view
    _close(gemm.mm_tn(a, b), a.double().t() @ b.double())


def test_only_large_float32_cpu_products_outside_autograd_go_to_onednn(monkeypatch):
    gemm.set_backend("torch" if not ONEDNN else "onednn")
    try:
        calls = []

        class Recording:
            def __call__(self, *args):
                calls.append("linear")
                return torch.ops.mkldnn._linear_pointwise(*args)

            def binary(self, *args):
                calls.append("binary")
                return torch.ops.mkldnn._linear_pointwise.binary(*args)

        monkeypatch.setattr(gemm, "_onednn_linear", Recording)
        big = torch.randn(512, 256), torch.randn(256, 64)
        small = torch.randn(16, 16), torch.randn(16, 16)
        gemm.mm(*small)
        gemm.mm(big[0].double(), big[1].double())
        gemm.mm(big[0].bfloat16(), big[1].bfloat16())
        weight = big[1].clone().requires_grad_()
        product = gemm.mm(big[0], weight)
        assert product.requires_grad  # torch's product, recorded for backward
        assert calls == []
        with torch.no_grad():
            gemm.mm(big[0], weight)
        gemm.addmm(torch.zeros(512, 64), *big)
        assert calls == (["linear", "binary"] if ONEDNN else [])
    finally:
        gemm.set_backend(None)


def test_choice_by_setting_and_vendor(monkeypatch):
    monkeypatch.setattr(gemm, "_onednn_linear", lambda: object())
    monkeypatch.setattr(gemm.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(gemm, "_cpu_vendor", lambda: "AuthenticAMD")
    assert gemm._choose("auto") and gemm._choose("onednn") and not gemm._choose("torch")
    monkeypatch.setattr(gemm, "_cpu_vendor", lambda: "GenuineIntel")
    assert not gemm._choose("auto") and gemm._choose("onednn")
    monkeypatch.setattr(gemm.platform, "machine", lambda: "aarch64")
    assert not gemm._choose("auto")
    monkeypatch.setattr(gemm, "_onednn_linear", lambda: None)
    assert not gemm._choose("onednn")
    with pytest.raises(UsageError, match="GNNSCALE_GEMM must be one of auto, onednn, torch, "
                                         "got 'mkl'"):
        gemm._choose("mkl")


def test_a_bad_setting_stops_the_cli_with_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "gnnscale", "train", "--dataset", "cora", "--epochs", "1",
         "--metrics-out", str(tmp_path / "run.jsonl")],
        capture_output=True, text=True, env={**os.environ, "GNNSCALE_GEMM": "mkl"})
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[-1].endswith("GNNSCALE_GEMM must be one of auto, onednn, torch, got 'mkl'")
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run.jsonl").exists()
