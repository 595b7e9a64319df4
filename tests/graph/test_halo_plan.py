"""HaloPlan.configure and post in one process (multi-rank exchanges: test_overlap_paths.py)."""

import pytest
import torch

from gnnscale.comm import SingleCommunicator
from gnnscale.graph import HaloPlan
from gnnscale.graph.halo import post_halo
from gnnscale.graph.staleness_netsim import SlowNetwork


def _plan():
    comm = SingleCommunicator()
    return HaloPlan(comm=comm, num_owned=4, num_halo=0,
                    send_index=torch.zeros(0, dtype=torch.long), send_counts=[0], recv_counts=[0])


def test_configure_changes_only_what_it_is_given():
    plan = _plan()
    assert (plan.overlap, plan.message_dtype, plan.align_posts) == (True, None, False)
    assert plan.configure(overlap=False) is plan
    assert (plan.overlap, plan.message_dtype) == (False, None)
    plan.configure(message_dtype=torch.bfloat16)
    assert (plan.overlap, plan.message_dtype) == (False, torch.bfloat16)
    plan.configure(align_posts=True, message_dtype=None)
    assert (plan.overlap, plan.message_dtype, plan.align_posts) == (False, None, True)


def test_simulated_network_wraps_the_real_one_once_and_comes_off():
    plan = _plan()
    real = plan.comm
    plan.configure(simulate_network=(1e-3, 1.25e8))
    assert isinstance(plan.comm, SlowNetwork) and plan.comm.inner is real
    plan.configure(simulate_network=(2e-3, 1e9))  # replaces, never stacks
    assert plan.comm.inner is real and plan.comm.latency_s == 2e-3
    assert plan.comm.bandwidth_bps == 1e9
    plan.configure(overlap=True)
    assert isinstance(plan.comm, SlowNetwork)
    plan.configure(simulate_network=None)
    assert plan.comm is real


def test_bad_settings_are_refused():
    plan = _plan()
    with pytest.raises(ValueError, match="message_dtype must be a torch.dtype"):
        plan.configure(message_dtype="bfloat16")
    with pytest.raises(ValueError, match="bandwidth_bps > 0"):
        plan.configure(simulate_network=(0.0, 0.0))
    for bad in (0, -5, 1.5, True, "64M"):
        with pytest.raises(ValueError, match="chunk_bytes must be a positive int or None"):
            plan.configure(chunk_bytes=bad)


class _PeerWithMoreRows(SingleCommunicator):
    """Two ranks as far as the plan can tell; the other one sends or receives 1,000 rows."""

    def __init__(self):
        super().__init__()
        self.reductions = 0

    @property
    def size(self) -> int:
        return 2

    def allreduce_scalar(self, value, op="sum"):
        assert op == "max"
        self.reductions += 1
        return max(float(value), 1000.0)


def test_column_blocks_keep_every_rank_under_chunk_bytes_with_the_same_split():
    comm = _PeerWithMoreRows()
    plan = HaloPlan(comm=comm, num_owned=10, num_halo=7, send_index=torch.arange(3),
                    send_counts=[0, 3], recv_counts=[0, 7])
    assert plan.column_blocks(64, 4) == [slice(0, 64)]  # 1,000 x 64 x 4 B: under 64 MiB
    plan.configure(chunk_bytes=1000 * 4 * 10)  # the peer's 1,000 rows: 10 columns a block
    assert plan.column_blocks(64, 4) == [slice(lo, min(64, lo + 10)) for lo in range(0, 64, 10)]
    plan.configure(chunk_bytes=1000 * 4 * 9)  # 9 columns fit: 8 blocks, so 8 equal ones
    assert plan.column_blocks(64, 4) == [slice(lo, lo + 8) for lo in range(0, 64, 8)]
    assert plan.column_blocks(8, 4) == [slice(0, 8)]  # fits in one block
    assert plan.column_blocks(64, 1000 * 4 * 9 * 2) == [slice(i, i + 1) for i in range(64)]
    assert comm.reductions == 1  # the largest buffer is agreed on once
    plan.configure(chunk_bytes=None)
    assert plan.column_blocks(64, 4) == [slice(0, 64)]
    assert _plan().configure(chunk_bytes=1).column_blocks(64, 4) == [slice(0, 64)]  # 1 rank


def test_column_blocks_are_sized_on_the_bytes_rows_travel_as():
    from gnnscale.graph.quantize import QuantizedWire

    plan = HaloPlan(comm=_PeerWithMoreRows(), num_owned=10, num_halo=7,
                    send_index=torch.arange(3), send_counts=[0, 3], recv_counts=[0, 7])
    plan.configure(chunk_bytes=1000 * 32)  # the peer's 1,000 rows of 32 bytes a block
    assert plan.column_blocks(64, 4) == [slice(lo, lo + 8) for lo in range(0, 64, 8)]
    plan.configure(message_dtype=torch.bfloat16)  # 2 bytes a value on the wire, not 4
    assert plan.column_blocks(64, 4) == [slice(lo, lo + 16) for lo in range(0, 64, 16)]
    plan.configure(message_dtype=QuantizedWire(8))  # 24 codes + 8 bytes of scale and offset
    assert plan.column_blocks(64, 4) == [slice(0, 22), slice(22, 44), slice(44, 64)]
    plan.configure(message_dtype=QuantizedWire(4))  # 48 columns fit: 2 blocks
    assert plan.column_blocks(64, 4) == [slice(0, 32), slice(32, 64)]
    plan.configure(message_dtype=QuantizedWire(2))  # a whole row is 16 + 8 bytes
    assert plan.column_blocks(64, 4) == [slice(0, 64)]
    # gradients are sized on their own format
    assert plan.column_blocks(64, 4, gradient=True) == [slice(0, 64)]
    plan.configure(gradient_dtype=QuantizedWire(8))
    assert plan.column_blocks(64, 4, gradient=True) == [slice(0, 22), slice(22, 44),
                                                       slice(44, 64)]
    for bits in (8, 4, 2):  # every block's buffer stays under chunk_bytes, and no block
        wire = QuantizedWire(bits)  # could be wider
        plan.configure(message_dtype=wire, chunk_bytes=1000 * 20)
        blocks = plan.column_blocks(64, 4)
        widest = max(b.stop - b.start for b in blocks)
        assert 1000 * wire.row_bytes(widest) <= 1000 * 20
        assert len(blocks) == -(-64 // max(c for c in range(1, 65)
                                           if wire.row_bytes(c) <= 20))
    # scale and offset alone outgrow the budget: one column a block, as for float32
    plan.configure(message_dtype=QuantizedWire(2), chunk_bytes=1000 * 8)
    assert plan.column_blocks(64, 4) == [slice(i, i + 1) for i in range(64)]


def test_post_sends_in_the_message_dtype_and_counts_bytes():
    plan = _plan().configure(message_dtype=torch.bfloat16)
    rows = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    received = plan.wait(plan.post(rows, [3], [3]))
    assert received.dtype == torch.float32
    torch.testing.assert_close(received, rows)  # these values are exact in bfloat16
    assert plan.stats.halo_bytes_sent == rows.numel() * 2 and plan.stats.exchanges == 1



def test_counts_of_forward_and_reverse_exchanges():
    plan = _plan()
    plan.send_counts, plan.recv_counts = [2], [3]
    assert plan.counts() == ([2], [3]) and plan.counts(reverse=True) == ([3], [2])


class _Between(torch.autograd.Function):
    """Identity that records when its backward runs."""

    @staticmethod
    def forward(ctx, x, events):
        ctx.events = events
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        ctx.events.append("work in between")
        return grad, None


@pytest.mark.parametrize("overlap", [True, False])
def test_reverse_exchange_travels_while_the_work_in_between_runs_backward(overlap):
    events = []
    plan = HaloPlan(comm=SingleCommunicator(), num_owned=4, num_halo=2,
                    send_index=torch.tensor([1, 3]), send_counts=[2], recv_counts=[2])
    plan.configure(overlap=overlap)
    post_backward, wait = plan.post_backward, plan.wait
    owned = torch.arange(8.0).view(4, 2).requires_grad_()
    finish = post_halo(owned, plan)
    between = _Between.apply(owned * 2, events)  # computed while the halo travels
    halo = finish()
    torch.testing.assert_close(halo, owned.detach()[[1, 3]])
    plan.post_backward = lambda grad: (events.append("post reverse"), post_backward(grad))[1]
    plan.wait = lambda work: (events.append("wait reverse"), wait(work))[1]
    (between.sum() + 3 * halo.sum()).backward()
    if overlap:
        assert events == ["post reverse", "work in between", "wait reverse"]
    else:  # waited for as soon as it is posted
        posted = events.index("post reverse")
        assert events[posted + 1] == "wait reverse" and "work in between" in events
    torch.testing.assert_close(owned.grad, torch.tensor([[2.0, 2], [5, 5], [2, 2], [5, 5]]))


def test_send_positions_place_the_sent_rows_among_some_owned_rows():
    plan = HaloPlan(comm=SingleCommunicator(), num_owned=10, num_halo=0,
                    send_index=torch.tensor([7, 2, 7, 9]), send_counts=[4], recv_counts=[4])
    columns = torch.tensor([0, 2, 5, 7, 9])
    positions = plan.send_positions(columns)
    assert positions.tolist() == [3, 1, 3, 4]
    assert torch.equal(columns[positions], plan.send_index)
    owned = torch.arange(10.0).unsqueeze(1)
    sent = plan.post_forward(owned[columns], positions).wait()  # one rank: sent to itself
    assert sent.squeeze(1).tolist() == [7.0, 2.0, 7.0, 9.0]
    grad = plan.accumulate_into_owned(torch.zeros(5, 1), torch.ones(4, 1), positions)
    assert grad.squeeze(1).tolist() == [0.0, 1.0, 0.0, 2.0, 1.0]
    for missing in (torch.tensor([0, 2, 5, 9]), torch.tensor([0, 2, 5, 7])):
        with pytest.raises(ValueError, match="a sent row is not among the columns given"):
            plan.send_positions(missing)


def test_a_policy_progresses_an_exchange_in_flight_and_nothing_else():
    """What a vertex cut's products call between row blocks: the exact policy's posted
    exchange's ``test``; with overlap off the exchange is completed at once instead (halo
    wait charged) and nothing is called; a stale policy's answer needs nothing."""
    from gnnscale.graph.staleness import ExactPolicy, PipelinedPolicy

    plan, rows = _plan(), torch.ones(4, 3)
    plan.configure(simulate_network=(0.0, 1e9))  # a Work completed by its wait() only
    policy = ExactPolicy()
    handle = policy.start((0, "fwd"), rows[:0], plan, reverse=False, kind="features")
    progress = policy.progress(handle, plan)
    assert progress == handle.test and progress()
    plan.configure(overlap=False)
    waited = policy.start((1, "fwd"), rows[:0], plan, reverse=False, kind="features")
    assert not waited.is_completed()
    assert policy.progress(waited, plan) is None and waited.is_completed()
    stale = PipelinedPolicy()
    answer = stale.start((0, "fwd"), rows[:0], plan, reverse=False, kind="features")
    assert stale.progress(answer, plan) is None
