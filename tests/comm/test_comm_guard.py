"""Checked-mode signatures, timeouts and launcher helpers, in one process (no MPI job)."""

import time

import numpy as np
import pytest
import torch

from gnnscale.comm import CollectiveMismatchError, CommTimeoutError, PeerFailedError
from gnnscale.comm.guard import (CallSignature, FailureBoard, Guard, StoreFailureBoard,
                                 exchange_length, find_mismatch, fused_payload_bytes, resolve_check,
                                 resolve_timeout, signature_length)
from gnnscale.comm.launch import detect_launch, first_host, slurm_rendezvous
from gnnscale.errors import CommError


def gathered(*sigs, seqs=None):
    size = len(sigs)
    seqs = seqs or [1] * size
    return np.stack([s.encode(q, size) for s, q in zip(sigs, seqs)])


def test_signature_round_trip_and_description():
    sig = CallSignature("allreduce", "sum", torch.bfloat16, (4, 5))
    seq, back = CallSignature.decode(sig.encode(7, 3), 3)
    assert seq == 7 and (back.kind, back.op, back.dtype, back.shape) == ("allreduce", "sum",
                                                                         torch.bfloat16, (20,))
    assert back.describe() == "allreduce(bfloat16[20], op=sum)"
    a2a = CallSignature("alltoallv", None, torch.float32, (3, 16), -1, (1, 2), (2, 1))
    _, back = CallSignature.decode(a2a.encode(1, 2), 2)
    assert back.send_counts == (1, 2) and back.recv_counts == (2, 1) and back.shape == (3, 16)
    assert "rows of 16" in back.describe()
    assert len(sig.encode(1, 2)) == exchange_length(2) > signature_length(2)


def test_payload_rides_after_the_signature():
    payload = np.arange(16, dtype=np.uint8)
    vec = CallSignature("allreduce", "sum", torch.uint8, (16,)).encode(1, 2, payload)
    assert vec[signature_length(2):].view(np.uint8)[:16].tolist() == list(range(16))
    assert fused_payload_bytes(2) == 2048 and fused_payload_bytes(10**6) == 0


def test_matching_signatures_pass():
    sig = CallSignature("allreduce", "sum", torch.float32, (10,))
    assert find_mismatch(gathered(sig, sig, sig), 3) is None
    # the same element count in a different shape is fine for an allreduce
    other = CallSignature("allreduce", "sum", torch.float32, (2, 5))
    assert find_mismatch(gathered(sig, other), 2) is None
    ok = [CallSignature("alltoallv", None, torch.float32, (3, 4), -1, (1, 2), (1, 3)),
          CallSignature("alltoallv", None, torch.float32, (5, 4), -1, (3, 2), (2, 2))]
    assert find_mismatch(gathered(*ok), 2) is None


@pytest.mark.parametrize("other,problem", [
    (CallSignature("allreduce", "sum", torch.float64, (10,)), "different dtypes"),
    (CallSignature("allreduce", "sum", torch.float32, (11,)), "different element counts"),
    (CallSignature("allreduce", "max", torch.float32, (10,)), "different reduction ops"),
    (CallSignature("broadcast", None, torch.float32, (10,), 0), "different collectives"),
    (CallSignature("barrier"), "different collectives"),
])
def test_mismatches_name_ranks_and_calls(other, problem):
    sig = CallSignature("allreduce", "sum", torch.float32, (10,))
    message = find_mismatch(gathered(sig, sig, other), 3, "world")
    assert problem in message
    assert "ranks 0,1: allreduce(float32[10], op=sum) (call #1)" in message
    assert f"rank 2: {other.describe()}" in message
    guard = Guard(0, 3, timeout=1, check=True)
    with pytest.raises(CollectiveMismatchError, match=problem):
        guard.verify(gathered(sig, sig, other))


def test_inconsistent_alltoallv_counts_and_roots():
    bad = [CallSignature("alltoallv", None, torch.float32, (2, 4), -1, (1, 1), (2, 2)),
           CallSignature("alltoallv", None, torch.float32, (2, 4), -1, (1, 1), (1, 1))]
    assert "rank 0 sends 1 rows to rank 0, which expects 2" in find_mismatch(gathered(*bad), 2)
    roots = [CallSignature("broadcast", None, torch.float32, (3,), r) for r in (0, 1)]
    assert "different roots" in find_mismatch(gathered(*roots), 2)
    widths = [CallSignature("alltoallv", None, torch.float32, (2, w), -1, (1, 1), (1, 1))
              for w in (4, 5)]
    assert "different row widths" in find_mismatch(gathered(*widths), 2)


def test_shared_buffer_on_some_ranks_only_is_a_mismatch():
    plain = CallSignature("allreduce", "sum", torch.float32, (10,))
    shared = CallSignature("allreduce", "sum", torch.float32, (10,), path=1)
    message = find_mismatch(gathered(plain, shared), 2)
    assert "alloc_buffer on some ranks only" in message and "shared-memory buffer" in message


def test_skipped_call_shows_as_sequence_mismatch():
    sig = CallSignature("barrier")
    assert "call #3" in find_mismatch(gathered(sig, sig, seqs=[3, 4]), 2)


def test_wait_times_out_and_reads_failure_notices():
    guard = Guard(0, 2, timeout=0.2, check=False)
    with pytest.raises(CommTimeoutError, match="did not complete within 0.2 s"):
        guard.wait(lambda: False, "allreduce(x)")

    class Board(FailureBoard):
        def poll(self):
            return (1, "ValueError: boom")

    guard = Guard(0, 2, timeout=5, check=False, board=Board())
    with pytest.raises(PeerFailedError, match=r"rank 1 failed \(ValueError: boom\)") as info:
        guard.wait(lambda: False, "barrier()")
    assert info.value.failed_rank == 1 and isinstance(info.value, CommError)


class FlakyStore:
    """A key-value store that can be switched off, as when rank 0 (its host) exits."""

    def __init__(self):
        self.up, self.keys = True, {}

    def _reach(self):
        if not self.up:
            raise RuntimeError("Connection reset by peer")

    def add(self, key, amount):
        self._reach()
        self.keys[key] = self.keys.get(key, 0) + amount
        return self.keys[key]

    def set(self, key, value):
        self._reach()
        self.keys[key] = value.encode()

    def check(self, keys):
        self._reach()
        return all(key in self.keys for key in keys)

    def get(self, key):
        self._reach()
        return self.keys[key]


def test_store_board_reads_notices_and_waits_out_a_finished_host():
    store = FlakyStore()
    board, peer = StoreFailureBoard(store, 1, 2, grace_s=0.2), StoreFailureBoard(store, 0, 2)
    assert board.poll() is None
    store.up = False  # rank 0 left its last collective and exited: not a failure yet
    assert board.poll() is None
    store.up = True
    assert board.poll() is None  # reachable again: the grace period starts over
    store.up = False
    assert board.poll() is None
    time.sleep(0.25)
    assert board.poll() == (0, "the rendezvous store (hosted by rank 0) has been unreachable "
                               "for 0.2 s")
    store.up = True
    peer.post("ValueError: boom")
    assert StoreFailureBoard(store, 1, 2).poll() == (0, "ValueError: boom")


def test_timeout_and_check_settings(monkeypatch):
    monkeypatch.setenv("GNNSCALE_COMM_TIMEOUT", "12.5")
    assert resolve_timeout(None) == 12.5 and resolve_timeout(3) == 3.0
    monkeypatch.setenv("GNNSCALE_COMM_TIMEOUT", "soon")
    with pytest.raises(CommError, match="not a number"):
        resolve_timeout(None)
    with pytest.raises(CommError, match="positive"):
        resolve_timeout(0)
    monkeypatch.setenv("GNNSCALE_COMM_CHECK", "0")
    assert resolve_check(None) is False and resolve_check(True) is True
    monkeypatch.delenv("GNNSCALE_COMM_CHECK")
    assert resolve_check(None) is True


def test_launchers_documented_in_launch_are_recognised():
    env = {"PMIX_RANK": "3"}
    assert detect_launch(env).launcher == "mpi"
    env = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1"}
    assert detect_launch(env).local_rank == 1
    assert first_host("gpu[07-09,12],cpu1") == "gpu07"
    assert first_host("node3") == "node3" and first_host("a[1,4]") == "a1"
    assert slurm_rendezvous({"SLURM_STEP_NODELIST": "n[2-3]", "SLURM_JOB_ID": "20042"}) == \
        ("n2", 20042)
    assert slurm_rendezvous({"MASTER_ADDR": "h", "MASTER_PORT": "123"}) == ("h", 123)
    with pytest.raises(ValueError, match="MASTER_ADDR"):
        slurm_rendezvous({})
