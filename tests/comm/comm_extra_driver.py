"""What comm_driver.py's collective checks do not cover (its case ``extra:NODE_SIZE``).

Checks the ring allreduce path (forced on small buffers by GNNSCALE_RING_MIN_BYTES), reduce,
async ordering, nested split, large objects, and the hierarchical allreduce with forced node
groups against the flat one.
"""

import torch

from gnnscale.comm import HierarchicalCommunicator, node_groups


def check_extra_paths(comm, node_size: int) -> None:
    """The extra paths of ``comm``, with node groups of ``node_size`` ranks."""
    rank, size = comm.rank, comm.size
    total = size * (size + 1) // 2
    # several allreduces in flight at once, waited in reverse order, odd lengths, all dtypes
    works, tensors = [], []
    for numel in (1, 7, 1001, 50_003):
        for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32):
            tensor = torch.full((numel,), rank + 1, dtype=dtype)
            tensors.append(tensor)
            works.append(comm.allreduce_async(tensor))
    for work in reversed(works):
        work.wait()
    for tensor in tensors:
        assert torch.all(tensor == total), (tensor.dtype, tensor.numel(), tensor[:3])
    for op, expected in (("max", size - 1), ("min", 0)):
        tensor = torch.arange(20_000, dtype=torch.float32) + rank
        comm.allreduce(tensor, op)
        assert torch.equal(tensor, torch.arange(20_000, dtype=torch.float32) + expected), op
    # bit-identical results everywhere (a ring reduces each chunk once, then copies it)
    gen = torch.Generator().manual_seed(rank)
    values = torch.randn(30_000, generator=gen)
    comm.allreduce(values)
    gathered = comm.allgather(values)
    assert all(torch.equal(gathered[0], gathered[r]) for r in range(size))
    # buffers from alloc_buffer (shared memory under MPI on one host) reduce in place
    buffers = [comm.alloc_buffer(n, dtype) for n, dtype in
               ((10, torch.float32), (30_001, torch.float32), (5_000, torch.bfloat16),
                (7, torch.int64))]
    for round_ in range(2):  # reused buffers
        for buffer in buffers:
            assert buffer.shape == (buffer.numel(),)
            buffer.copy_(torch.arange(buffer.numel()) % 7 + rank + round_)
        works = [comm.allreduce_async(b) for b in buffers]
        for work in works:
            work.wait()
        for buffer in buffers:
            expected = (torch.arange(buffer.numel()) % 7) * size + total - size + size * round_
            assert torch.equal(buffer.double(), expected.double()), (buffer.dtype, buffer[:5])
    buffers[1].copy_(torch.arange(30_001) + rank)
    comm.allreduce(buffers[1], "max")
    assert torch.equal(buffers[1], torch.arange(30_001, dtype=torch.float32) + size - 1)
    # reduce onto the last rank
    tensor = torch.full((5,), float(rank + 1))
    comm.reduce(tensor, root=size - 1)
    if rank == size - 1:
        assert torch.all(tensor == total)
    # nested split: halves, then singletons of the halves
    half = comm.split(rank % 2, key=-rank)  # reversed order inside each half
    assert half.rank == len(range(rank % 2, size, 2)) - 1 - rank // 2, (rank, half.rank)
    single = half.split(half.rank)
    assert single.size == 1 and single.allreduce(torch.ones(2)).tolist() == [1.0, 1.0]
    assert half.allgather_object(rank) == sorted(range(rank % 2, size, 2), reverse=True)
    # a large object
    blob = comm.broadcast_object(list(range(100_000)) if rank == 0 else None)
    assert blob[-1] == 99_999
    # hierarchical allreduce equals the flat one (integers: exactly; floats: to rounding)
    nodes = node_groups(comm, node_size)
    assert nodes == [r // node_size for r in range(size)]
    hier = HierarchicalCommunicator(comm, node_size=node_size)
    assert hier.num_nodes == len(set(nodes))
    for numel in (3, 70_001):
        ints = torch.arange(numel, dtype=torch.int64) * (rank + 1)
        flat_ints = ints.clone()
        hier.allreduce(ints)
        comm.allreduce(flat_ints)
        assert torch.equal(ints, flat_ints)
        floats = torch.randn(numel, generator=gen)
        flat_floats = floats.clone()
        hier.allreduce_async(floats).wait()
        comm.allreduce(flat_floats)
        torch.testing.assert_close(floats, flat_floats, rtol=1e-6, atol=1e-6)
        assert torch.equal(comm.allgather(floats)[0], floats)  # identical on every rank
    hier.barrier()
    check_exchange_posted_before_the_others_arrive(comm)


def check_exchange_posted_before_the_others_arrive(comm) -> None:
    """Checked mode compares an alltoallv's signature while its data travels: rank 0's post
    returns before any other rank has reached the exchange (the others wait for a word rank 0
    sends after its post; a post waiting for their signatures would never end), and every
    rank gets the rows."""
    side = getattr(comm, "mpi_comm", None)
    if side is None or not comm.guard.check:
        return
    side = side.Dup()
    rank, size = comm.rank, comm.size
    rows = torch.full((size, 2), float(rank))
    if rank == 0:
        work = comm.alltoallv_async(rows, [1] * size, [1] * size)
        for peer in range(1, size):
            side.send("posted", dest=peer, tag=7)
        got = work.wait()
    else:
        assert side.recv(source=0, tag=7) == "posted"
        got = comm.alltoallv(rows, [1] * size, [1] * size)
    assert torch.equal(got, torch.arange(size, dtype=torch.float32)[:, None].expand(size, 2))
    side.Free()
