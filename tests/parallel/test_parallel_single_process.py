"""DataParallel, compression, bucket sizing and large-batch recipes in one process."""

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from gnnscale.comm import SingleCommunicator
from gnnscale.comm.base import Work
from gnnscale.cnn import ResNet, count_parameters, resnet_small, resnet_small_fc
from gnnscale.parallel import (LARS, DataParallel, autocast, compress, decompress,
                               fit_latency_bandwidth, label_smoothing_cross_entropy, scaled_lr,
                               warmup_factor, warmup_schedule)
from gnnscale.parallel.bucket_size import (MAX_BUCKET_BYTES, MIN_BUCKET_BYTES,
                                           bucket_bytes_from_fit, default_bucket_bytes)


class FakeTwoRanks(SingleCommunicator):
    """Pretends to be rank 0 of 2 whose peer holds the same gradients: allreduce doubles.

    Records every allreduce, so tests can see buckets, order and payload dtypes.
    """

    def __init__(self):
        self.calls = []

    @property
    def size(self):
        return 2

    def allreduce_async(self, tensor, op="sum"):
        self.calls.append((tensor.dtype, tensor.numel()))
        tensor.mul_(2)
        return Work(result=tensor)

    def broadcast(self, tensor, root=0):
        return tensor


def tiny():
    torch.manual_seed(0)
    return ResNet(widths=(4, 8), blocks=(1, 1), num_classes=3, image_size=8, head="fc",
                  fc_hidden=(16,), fc_pool=1, norm="group")


def data():
    gen = torch.Generator().manual_seed(1)
    return torch.randn(6, 3, 8, 8, generator=gen), torch.randint(0, 3, (6,), generator=gen)


def test_world_of_one_leaves_gradients_alone():
    x, y = data()
    model, reference = tiny(), tiny()
    dp = DataParallel(model, SingleCommunicator())
    assert dp.bucket_bytes == MIN_BUCKET_BYTES  # a quarter of a tiny model, at least the minimum
    F.cross_entropy(dp(x), y).backward()
    F.cross_entropy(reference(x), y).backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.equal(p.grad, q.grad)


def test_buckets_reverse_order_sizes_and_gradient_views():
    x, y = data()
    model, reference = tiny(), tiny()
    comm = FakeTwoRanks()
    dp = DataParallel(model, comm, bucket_mb=0.001)  # ~1 KB buckets
    layout = dp.bucket_layout()
    names = [n for bucket in layout for n in bucket]
    assert names == [n for n, _ in reversed(list(model.named_parameters()))]
    assert len(layout) > 3
    F.cross_entropy(dp(x), y).backward()
    F.cross_entropy(reference(x), y).backward()
    assert len(comm.calls) == len(layout)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad)  # (2 * g) / 2 ranks
    # gradients now live in the buckets: the next accumulation is in place, no copy
    pointers = [p.grad.data_ptr() for p in model.parameters()]
    with dp.no_sync():
        F.cross_entropy(dp(x), y).backward()
    assert [p.grad.data_ptr() for p in model.parameters()] == pointers
    assert len(comm.calls) == len(layout)  # no_sync: nothing sent
    F.cross_entropy(dp(x), y).backward()
    assert len(comm.calls) == 2 * len(layout)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, 3 * q.grad)
    stats = dp.stats
    assert stats["buckets"] == len(layout) and 0.0 <= stats["hidden_fraction"] <= 1.0


def test_compressed_buckets_travel_in_16_bits_and_unused_grads_stay_none():
    x, y = data()
    model = tiny()
    model.unused = nn.Linear(2, 2)
    comm = FakeTwoRanks()
    dp = DataParallel(model, comm, bucket_mb=1, compression="bf16")
    F.cross_entropy(dp(x), y).backward()
    assert {dtype for dtype, _ in comm.calls} == {torch.bfloat16}
    assert model.unused.weight.grad is None
    assert all(p.grad is not None for n, p in model.named_parameters() if "unused" not in n)
    with pytest.raises(ValueError, match="unknown gradient compression 'int4'"):
        DataParallel(tiny(), comm, bucket_mb=1, compression="int4")


def test_compression_functions_scale_before_casting():
    big = torch.full((4,), 60000.0)
    wire = compress(big, 4, torch.float16)
    assert wire.dtype == torch.float16 and torch.isfinite(wire).all()
    summed = wire.float() * 4  # what 4 ranks' allreduce would produce
    out = torch.empty(4)
    decompress(summed.half(), out, 4, average=True)
    assert torch.allclose(out, big, rtol=1e-3)
    decompress(summed.half(), out, 4, average=False)
    assert torch.allclose(out, 4 * big, rtol=1e-3)


def test_latency_bandwidth_fit_and_bucket_rule(tmp_path, monkeypatch):
    sizes = [4096, 65536, 1 << 20, 4 << 20]
    alpha, beta = 50e-6, 1 / 2e9
    fitted = fit_latency_bandwidth(sizes, [alpha + beta * n for n in sizes])
    assert math.isclose(fitted[0], alpha, rel_tol=1e-6) and math.isclose(fitted[1], beta,
                                                                          rel_tol=1e-6)
    assert bucket_bytes_from_fit(alpha, beta) == int(alpha / beta * 9)
    assert bucket_bytes_from_fit(0.0, beta) == MIN_BUCKET_BYTES
    assert bucket_bytes_from_fit(1.0, beta) == MAX_BUCKET_BYTES
    monkeypatch.setenv("GNNSCALE_CACHE_DIR", str(tmp_path))
    comm = FakeTwoRanks()
    comm.backend = "fake"
    first = default_bucket_bytes(comm)  # measures, writes the cache
    assert (tmp_path / "bucket_fit.json").exists()
    calls = len(comm.calls)
    assert default_bucket_bytes(comm) == first and len(comm.calls) == calls  # cached


def test_lars_matches_its_formula():
    torch.manual_seed(0)
    weight = nn.Parameter(torch.randn(4, 3))
    bias = nn.Parameter(torch.randn(4))
    weight.grad, bias.grad = torch.randn(4, 3), torch.randn(4)
    w0, b0, gw, gb = (t.detach().clone() for t in (weight, bias, weight.grad, bias.grad))
    opt = LARS([weight, bias], lr=0.5, momentum=0.9, weight_decay=0.01, trust_coefficient=0.02)
    opt.step()
    d = gw + 0.01 * w0
    trust = 0.02 * w0.norm() / d.norm()
    torch.testing.assert_close(weight.detach(), w0 - 0.5 * trust * d)
    torch.testing.assert_close(bias.detach(), b0 - 0.5 * gb)  # 1-D: plain SGD
    opt.step()  # momentum accumulates
    assert "momentum_buffer" in opt.state[weight]
    with pytest.raises(ValueError, match="invalid LARS"):
        LARS([weight], lr=-1)


def test_linear_scaling_and_warmup():
    assert scaled_lr(0.1, 8192) == pytest.approx(3.2)
    assert warmup_factor(0, 4) == pytest.approx(0.25)
    assert warmup_factor(3, 4) == 1.0 and warmup_factor(100, 4) == 1.0
    assert warmup_factor(0, 10, start_factor=0.5) == pytest.approx(0.55)
    assert warmup_factor(14, 4, total_steps=14, decay="cosine") == pytest.approx(0.0)
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    schedule = warmup_schedule(opt, warmup_steps=4)
    lrs = []
    for _ in range(5):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        schedule.step()
    assert lrs == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0])


def test_label_smoothing_equals_torch():
    gen = torch.Generator().manual_seed(0)
    logits, target = torch.randn(5, 7, generator=gen), torch.randint(0, 7, (5,), generator=gen)
    for eps in (0.0, 0.1, 0.3):
        torch.testing.assert_close(label_smoothing_cross_entropy(logits, target, eps),
                                   F.cross_entropy(logits, target, label_smoothing=eps))


def test_bf16_autocast_on_cpu_trains():
    x, y = data()
    model = tiny()
    with autocast("bf16"):
        out = model(x)
    assert out.dtype == torch.bfloat16
    F.cross_entropy(out.float(), y).backward()
    assert all(p.grad.dtype == torch.float32 for p in model.parameters())
    with pytest.raises(ValueError, match="fp16 autocast is for CUDA"):
        autocast("fp16", "cpu")


def test_benchmark_models_have_the_advertised_sizes():
    assert 1.0e6 < count_parameters(resnet_small()) < 1.5e6
    assert 20e6 < count_parameters(resnet_small_fc()) < 24e6
    assert resnet_small(image_size=64)(torch.randn(1, 3, 64, 64)).shape == (1, 10)
