"""Run under mpirun by test_parallel_data_parallel.py: K-rank DataParallel vs one process.

argv: backend [modes] (comma-separated, default all). Modes:
- ``plain``: N SGD steps; every rank also trains a reference replica, alone, on the
  concatenated global batch; parameters must agree within 1e-5.
- ``no_sync``: two micro-batches per step, the first under ``no_sync()``.
- ``fp16`` / ``bf16``: compressed gradients after one step, within the stated tolerance.
- ``unused``: rank 0 uses an extra branch, the others do not, and one layer is never used:
  no hang, the never-used layer keeps ``grad = None``; the reference averages per-rank gradients.
"""

import sys

import torch
from torch import nn
from torch.nn import functional as F

from gnnscale.comm import init
from gnnscale.cnn import ResNet
from gnnscale.parallel import DataParallel
from gnnscale.parallel.compression import TOLERANCE

LOCAL_BATCH = 4


class Net(nn.Module):
    """A tiny ResNet (group norm: per-sample) with an FC head, an optional branch, a dead layer."""

    def __init__(self):
        super().__init__()
        self.body = ResNet(widths=(4, 8), blocks=(1, 1), num_classes=5, image_size=8,
                           head="fc", fc_hidden=(16,), fc_pool=1, norm="group")
        self.extra = nn.Linear(5, 5)
        self.never_used = nn.Linear(3, 3)

    def forward(self, x, use_extra=False):
        out = self.body(x)
        return out + self.extra(out) if use_extra else out


def batch(step: int, rank: int, size: int, micro: int = 0):
    """Rank ``rank``'s slice of the global batch of ``step`` (and the whole global batch)."""
    gen = torch.Generator().manual_seed(1000 * step + micro)
    x = torch.randn(size * LOCAL_BATCH, 3, 8, 8, generator=gen)
    y = torch.randint(0, 5, (size * LOCAL_BATCH,), generator=gen)
    part = slice(rank * LOCAL_BATCH, (rank + 1) * LOCAL_BATCH)
    return (x[part], y[part]), (x, y)


def max_diff(a: nn.Module, b: nn.Module) -> float:
    return max(float((p - q).abs().max()) for p, q in zip(a.parameters(), b.parameters()))


MODES = ("plain", "no_sync", "unused", "fp16", "bf16")


def main() -> None:
    torch.set_num_threads(1)
    backend = sys.argv[1]
    modes = sys.argv[2].split(",") if len(sys.argv) > 2 else MODES
    comm = init(backend)
    for mode in modes:
        run(comm, mode)


def run(comm, mode: str, steps: int = 3) -> None:
    rank, size = comm.rank, comm.size
    torch.manual_seed(rank)  # different init per rank: DataParallel must broadcast rank 0's
    model = Net()
    compression = mode if mode in ("fp16", "bf16") else None
    dp = DataParallel(model, comm, bucket_mb=0.002, compression=compression)
    reference = Net()
    reference.load_state_dict(model.state_dict())
    opt = torch.optim.SGD(dp.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    assert len(dp.bucket_layout()) > 2, dp.bucket_layout()

    if mode in ("fp16", "bf16"):
        (x, y), (gx, gy) = batch(0, rank, size)
        F.cross_entropy(dp(x), y).backward()
        F.cross_entropy(reference(gx), gy).backward()
        scale = max(float(p.grad.abs().max()) for p in reference.parameters()
                    if p.grad is not None)
        err = max(float((p.grad - q.grad).abs().max()) for p, q in
                  zip(model.parameters(), reference.parameters()) if q.grad is not None)
        assert err <= TOLERANCE[mode] * scale, (mode, err, scale)
        print(f"rank {rank} ok {mode} relative error {err / scale:.2e}", flush=True)
        return

    for step in range(steps):
        opt.zero_grad()
        ref_opt.zero_grad()
        if mode == "plain":
            (x, y), (gx, gy) = batch(step, rank, size)
            F.cross_entropy(dp(x), y).backward()
            F.cross_entropy(reference(gx), gy).backward()
        elif mode == "no_sync":
            for micro in range(2):
                (x, y), (gx, gy) = batch(step, rank, size, micro)
                if micro == 0:
                    with dp.no_sync():
                        (F.cross_entropy(dp(x), y) / 2).backward()
                    # nothing was exchanged: this rank's gradient is its own
                    assert dp.stats == {} or step > 0
                else:
                    (F.cross_entropy(dp(x), y) / 2).backward()
                (F.cross_entropy(reference(gx), gy) / 2).backward()
        elif mode == "unused":
            (x, y), _ = batch(step, rank, size)
            F.cross_entropy(dp(x, use_extra=rank == 0), y).backward()
            assert model.never_used.weight.grad is None
            for r in range(size):  # the reference: the mean of every rank's local gradient
                (rx, ry), _ = batch(step, r, size)
                (F.cross_entropy(reference(rx, use_extra=r == 0), ry) / size).backward()
        else:
            raise SystemExit(f"unknown mode {mode}")
        opt.step()
        ref_opt.step()
    diff = max_diff(model, reference)
    assert diff < 1e-5, f"rank {rank}: DataParallel differs from one process by {diff}"
    gathered = comm.allgather(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    assert torch.equal(gathered[0], gathered[-1]), "replicas diverged"
    print(f"rank {rank} ok {mode} max diff {diff:.2e} stats {dp.stats}", flush=True)


if __name__ == "__main__":
    main()
