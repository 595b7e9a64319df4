"""Run under mpirun by test_comm_collectives.py: exercises every collective, checks results."""

import sys

import torch

from gnnscale.comm import init


def main() -> None:
    comm = init(sys.argv[1] if len(sys.argv) > 1 else "auto")
    rank, size = comm.rank, comm.size
    # allreduce, blocking and async, all ops, several dtypes
    for dtype in (torch.float32, torch.float64, torch.int64, torch.bfloat16):
        t = torch.full((5,), rank + 1, dtype=dtype)
        comm.allreduce(t)
        assert torch.all(t == size * (size + 1) // 2), (dtype, t)
    t = torch.tensor([float(rank)])
    assert comm.allreduce_async(t, "max").wait().item() == size - 1
    assert comm.allreduce(torch.tensor([float(rank)]), "min").item() == 0
    # alltoallv: rank r sends (q + 1) rows of value 100*r + q to rank q, rows of width 3
    send_counts = [q + 1 for q in range(size)]
    recv_counts = [rank + 1] * size
    send = torch.cat([torch.full((q + 1, 3), 100.0 * rank + q) for q in range(size)])
    recv = comm.alltoallv_async(send, send_counts, recv_counts).wait()
    expected = torch.cat([torch.full((rank + 1, 3), 100.0 * p + rank) for p in range(size)])
    assert torch.equal(recv, expected), recv
    # empty blocks are fine
    recv = comm.alltoallv(torch.zeros((0, 2)), [0] * size, [0] * size)
    assert recv.shape == (0, 2)
    # allgather, broadcast, objects
    gathered = comm.allgather(torch.tensor([rank, rank * 2]))
    assert gathered.tolist() == [[r, 2 * r] for r in range(size)]
    b = torch.arange(4.0) * (rank == size - 1)
    comm.broadcast(b, root=size - 1)
    assert b.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert comm.allgather_object({"r": rank}) == [{"r": r} for r in range(size)]
    assert comm.broadcast_object("hello" if rank == 0 else None) == "hello"
    # split: even and odd ranks
    sub = comm.split(rank % 2)
    assert sub.size == len(range(rank % 2, size, 2))
    assert sub.allreduce(torch.tensor([1.0])).item() == sub.size
    comm.barrier()
    print(f"rank {rank} ok", flush=True)


if __name__ == "__main__":
    main()
