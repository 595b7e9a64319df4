"""Run by test_comm_cuda.py on a GPU machine: NCCL collectives and DataParallel on CUDA.

argv: nothing. Under mpirun each rank takes GPU ``local_rank % device_count``.
"""

import torch
from torch.nn import functional as F

from gnnscale.comm import init
from gnnscale.cnn import ResNet
from gnnscale.parallel import DataParallel


def main() -> None:
    comm = init("torch", device="cuda")
    rank, size = comm.rank, comm.size
    device = torch.device("cuda", torch.cuda.current_device())
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        t = torch.full((1000,), rank + 1.0, dtype=dtype, device=device)
        comm.allreduce_async(t).wait()
        assert torch.all(t == size * (size + 1) / 2), dtype
    send = torch.cat([torch.full((q + 1, 3), 100.0 * rank + q, device=device)
                      for q in range(size)])
    recv = comm.alltoallv(send, [q + 1 for q in range(size)], [rank + 1] * size)
    expected = torch.cat([torch.full((rank + 1, 3), 100.0 * p + rank, device=device)
                          for p in range(size)])
    assert torch.equal(recv, expected)
    gathered = comm.allgather(torch.tensor([rank], device=device))
    assert gathered.view(-1).tolist() == list(range(size))
    assert comm.allgather_object(rank) == list(range(size))  # CPU metadata through gloo
    # DataParallel on GPU equals one process on the concatenated batch
    torch.manual_seed(0)
    model = ResNet(widths=(8, 16), blocks=(1, 1), num_classes=5, image_size=16,
                   norm="group").to(device)
    reference = ResNet(widths=(8, 16), blocks=(1, 1), num_classes=5, image_size=16,
                       norm="group").to(device)
    reference.load_state_dict(model.state_dict())
    dp = DataParallel(model, comm, bucket_mb=0.01)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(4 * size, 3, 16, 16, generator=gen).to(device)
    y = torch.randint(0, 5, (4 * size,), generator=gen).to(device)
    mine = slice(4 * rank, 4 * rank + 4)
    F.cross_entropy(dp(x[mine]), y[mine]).backward()
    F.cross_entropy(reference(x), y).backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    print(f"rank {rank} cuda ok", flush=True)


if __name__ == "__main__":
    main()
