"""The collective checks of test_comm_collectives.py and test_comm_backends.py, several cases
in one launch (each rank that imports torch costs seconds before it does any work).

Usage: [mpirun -n N] python comm_driver.py BACKEND [CASE...]

CASE is ``collectives:K``: every collective checked on the first K ranks (on the communicator
``init(BACKEND)`` returned when K is N, else on one split off it, the other ranks checking
theirs beside it), ``extra:NODE_SIZE``: comm_extra_driver.py's checks on the world, or
``uneven:R`` (torch backend, last): rank R makes one process group more, and the next split is
refused on every rank. Without
a case: ``collectives:N``. Every rank that passed its part of a case prints ``CASE rank R of N
ok``; a check that fails raises, which prints its traceback and (with more than one rank)
aborts the job, so no case after it prints anything. After the last case rank 0 prints
``every case ran on every rank``.
"""

import sys

import torch

from comm_extra_driver import check_extra_paths
from gnnscale.comm import init

ALL_RAN = "every case ran on every rank"


def check_collectives(comm) -> None:
    """Every collective of ``comm``, its results checked on every rank."""
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


def check_uneven_groups_refused(world, extra_on: int) -> None:
    """Rank ``extra_on`` makes one torch process group more than the others: the next split
    is refused on every rank, naming the counts, instead of waiting forever. Leaves the ranks
    uneven, so it is the launch's last case."""
    import torch.distributed as dist

    if world.rank == extra_on:
        dist.new_group([extra_on], use_local_synchronization=True)
    try:
        world.split(0)
    except ValueError as error:
        assert "different numbers of torch process groups" in str(error), error
    else:
        raise AssertionError("a split over uneven process groups was not refused")


def run_case(world, case: str) -> None:
    """Run ``case`` (see the module doc); every rank says it passed its part."""
    kind, value = case.split(":")
    if kind == "extra":
        check_extra_paths(world, int(value))
    elif kind == "uneven":
        check_uneven_groups_refused(world, int(value))
        print(f"{case} rank {world.rank} of {world.size} ok", flush=True)
        return  # the world cannot split any more; its barrier still works
    elif int(value) == world.size:
        check_collectives(world)
    else:
        # the first K ranks on a communicator of their own, the others on another, each
        # checked: every rank then makes as many torch process groups (torch names a new group
        # by how many the process has made, so a rank that made fewer would wait forever in
        # the next split of the world)
        first = world.rank < int(value)
        comm = world.split(0 if first else 1)
        assert comm.size == (int(value) if first else world.size - int(value)), case
        check_collectives(comm)
    print(f"{case} rank {world.rank} of {world.size} ok", flush=True)
    world.barrier()


def main(argv) -> None:
    torch.set_num_threads(1)
    world = init(argv[0])
    for case in argv[1:] or [f"collectives:{world.size}"]:
        run_case(world, case)  # ends in a barrier of the world
    if world.rank == 0:
        print(ALL_RAN, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
