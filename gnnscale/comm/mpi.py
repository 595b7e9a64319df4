"""MPI backend (mpi4py). CPU tensors are handed to MPI as NumPy views: no copies.

Data types NumPy cannot describe (bfloat16) travel as raw 16-bit words for data movement; for
small reductions they are summed in float32 and rounded back, since MPI has no bfloat16 sum.

Paths of an allreduce, chosen from the size, dtype and memory of the tensor (so every rank
chooses the same one):

- checked mode on and at most 2 KiB: the data ride in the signature allgather and are reduced
  locally (one collective instead of two);
- a tensor from :meth:`MPICommunicator.alloc_buffer` (shared memory, all ranks on one host):
  :func:`~.shm.shm_allreduce`, loads and stores only, on the communication thread;
- at least ``ring_min_bytes`` (default :data:`RING_MIN_BYTES`, or ``$GNNSCALE_RING_MIN_BYTES``):
  a segmented ring (:mod:`.ring`) on the communication thread;
- otherwise MPI's own non-blocking allreduce, posted from the caller's thread.

Two channels keep every rank's calls in the same order without locks: calls posted from the
caller's thread run on ``mpi_comm`` in program order; the communication thread (:mod:`.worker`)
runs its jobs in submission order on a duplicate communicator. Threaded work progresses while
the caller computes (gradient buckets during backward), which MPI's own non-blocking
collectives on CPUs mostly do not.

An alltoallv sends its messages to other hosts of a few times the TCP eager limit as pieces
that each fit under it (:mod:`.eager_pieces`). Checked mode and deadlines come from
:mod:`.guard`.
"""

from __future__ import annotations

import atexit
import os
import pickle
import time
from typing import Any, Sequence

import numpy as np
import torch

from .alltoallv_layout import Layouts
from .base import Work, check_op, check_root, numpy_reducer, reduce_stack
from .eager_pieces import check_piece_bytes, piece_bytes_from_env
from .guard import (CallSignature, CollectiveMismatchError, FailureBoard, Guard,
                    MPIFailureBoard, PeerFailedError, exchange_length, fused_payload_bytes,
                    signature_length)
from .guarded import GuardedCommunicator
from .mpi_library import abort_world, load_mpi
from .ring import ring_allreduce
from .shm import SharedBuffer, shm_allreduce, shm_available
from .worker import CommWorker

RING_MIN_BYTES = 1 << 20  # MPI's own allreduce below this (benchmarks/allreduce_bench.py)
RING_SPIN_S = 30e-6  # the communication thread shares the core with backward: spin little
RING_YIELD_S = 2e-4
ENV_RING_MIN_BYTES = "GNNSCALE_RING_MIN_BYTES"
_TAG_EAGER_PIECE = 0x6E70  # point-to-point pieces of alltoallv messages on ``mpi_comm``
_RING_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                torch.int32)
_FUSED_DTYPES = _RING_DTYPES + (torch.int16, torch.int8, torch.uint8)
_NUMPY_NATIVE = {torch.float32: np.float32, torch.float64: np.float64, torch.int64: np.int64,
                 torch.int32: np.int32, torch.int16: np.int16, torch.int8: np.int8,
                 torch.uint8: np.uint8}


def _as_numpy(tensor: torch.Tensor) -> np.ndarray:
    """Zero-copy NumPy view of a contiguous CPU tensor (bf16/f16 as int16 words)."""
    if tensor.device.type != "cpu":
        raise ValueError(f"the MPI backend moves CPU tensors; got one on {tensor.device} "
                         f"(use backend='torch' with NCCL for GPU tensors)")
    if not tensor.is_contiguous():
        raise ValueError("MPI buffers must be contiguous; call .contiguous() first")
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.view(torch.int16)
    return tensor.detach().numpy()


def _reduce_rows(rows: np.ndarray, skip_words: int, tensor: torch.Tensor, nbytes: int,
                op: str) -> torch.Tensor:
    """Reduce the per-rank copies of ``tensor`` gathered after the signatures, into ``tensor``.

    Every rank reduces the same rows in the same order, so all get identical bits; 16-bit
    floats are summed in float32 and rounded once, like the MPI path.
    """
    data = rows[:, skip_words:].view(np.uint8)[:, :nbytes]
    if tensor.dtype in _NUMPY_NATIVE:  # numpy reduces straight from the gathered rows
        values, out = data.view(_NUMPY_NATIVE[tensor.dtype]), tensor.numpy().reshape(-1)
        reducer = numpy_reducer(op)
        with np.errstate(all="ignore"):  # overflow gives inf silently, as in torch
            if values.shape[0] == 2:
                reducer(values[0], values[1], out=out)
            else:
                reducer.reduce(values, axis=0, out=out)
        return tensor
    stack = torch.from_numpy(np.ascontiguousarray(data)).view(tensor.dtype).view(rows.shape[0], -1)
    if tensor.dtype in (torch.float16, torch.bfloat16) and op == "sum":
        stack = stack.float()
    return tensor.copy_(reduce_stack(stack, op).view_as(tensor))


_WORLD_BOARD: list = []


def world_failure_board() -> FailureBoard:
    """The process's failure board on ``MPI.COMM_WORLD`` (created once, collectively)."""
    if not _WORLD_BOARD:
        MPI = load_mpi()
        board = MPIFailureBoard(MPI.COMM_WORLD) if MPI.COMM_WORLD.Get_size() > 1 \
            else FailureBoard()
        atexit.register(board.close)  # runs before mpi4py's MPI_Finalize (registered earlier)
        _WORLD_BOARD.append(board)
    return _WORLD_BOARD[0]


#: seconds a rank told of a peer's failure still gives its own signature check to finish, so
#: that a mismatch is reported by every rank and not only by the first to see it
MISMATCH_GRACE_S = 1.0


def _settles(check) -> bool:
    """Whether a signature ``check`` has completed, whether or not it found a mismatch."""
    try:
        return check()
    except CollectiveMismatchError:
        return True


def _completes_within(test, seconds: float) -> bool:
    """Whether ``test()`` turns true within ``seconds`` (polled every 1 ms)."""
    deadline = time.monotonic() + seconds
    while not test():
        if time.monotonic() > deadline:
            return False
        time.sleep(1e-3)
    return True


class MPICommunicator(GuardedCommunicator):
    """Communicator over an ``mpi4py`` communicator (``MPI.COMM_WORLD`` by default).

    Args:
        mpi_comm: the mpi4py communicator (default ``MPI.COMM_WORLD``).
        timeout: seconds before a collective is declared stuck (see :mod:`.guard`).
        check: checked mode (signatures compared before each collective); default on.
        ring_min_bytes: allreduces at least this large use the threaded ring.
        eager_piece_bytes: alltoallv pieces between hosts (:mod:`.eager_pieces`; 0: none);
            default ``$GNNSCALE_EAGER_PIECE_BYTES`` or 64 KiB less 256.
        guard: share an existing :class:`~.guard.Guard` (used by :meth:`split`).
    Construction is collective over ``mpi_comm`` (it duplicates it for the side channels).
    """

    backend = "mpi"

    def __init__(self, mpi_comm=None, *, timeout: float | None = None, check: bool | None = None,
                 ring_min_bytes: int | None = None, guard: Guard | None = None,
                 name: str = "world", eager_piece_bytes: int | None = None):
        MPI = load_mpi()
        self._MPI = MPI
        self.mpi_comm = MPI.COMM_WORLD if mpi_comm is None else mpi_comm
        self._rank = self.mpi_comm.Get_rank()
        self._size = self.mpi_comm.Get_size()
        self._ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
        self.name = name
        if guard is None:
            is_world = MPI.Comm.Compare(self.mpi_comm, MPI.COMM_WORLD) in (MPI.IDENT,
                                                                           MPI.CONGRUENT)
            board = world_failure_board() if is_world or _WORLD_BOARD else FailureBoard()
            guard = Guard(self._rank, self._size, timeout, check, board)
        self.guard = guard
        if ring_min_bytes is None:
            ring_min_bytes = int(os.environ.get(ENV_RING_MIN_BYTES, RING_MIN_BYTES))
        self.ring_min_bytes = int(ring_min_bytes)
        multi = self._size > 1
        self._sig_comm = self.mpi_comm.Dup() if multi and guard.check else None
        self._ring_comm = self.mpi_comm.Dup() if multi else None
        self._exchange_len = exchange_length(self._size)
        self._fused_bytes = fused_payload_bytes(self._size)
        self._init_calls()
        self._worker: CommWorker | None = None
        self._elsewhere: np.ndarray | None = None  # per rank: on another host
        #: alltoallv messages' pieces posted to and from other hosts (:mod:`.eager_pieces`)
        self.eager_pieces_posted = 0
        self._piece_bytes = piece_bytes_from_env() if eager_piece_bytes is None \
            else check_piece_bytes(eager_piece_bytes)
        self._shared: dict[int, tuple] = {}  # data_ptr -> (SharedBuffer, typed views)
        self._layouts = Layouts(self._size, self._sig_comm is not None)

    # -- plumbing -------------------------------------------------------------------------
    def _post_signature(self, sig: CallSignature, payload: np.ndarray | None = None,
                        encoded: np.ndarray | None = None):
        """Start the signature allgather (program order); None when checking is off.
        ``encoded``: ``sig`` encoded already with sequence number 0 (no payload)."""
        self._seq += 1
        if self._sig_comm is None:
            return None
        if encoded is None:
            vec = sig.encode(self._seq, self._size, payload)
        else:
            vec = encoded.copy()
            vec[0] = self._seq
        rows = np.empty((self._size, self._exchange_len), dtype=np.int64)
        return self._sig_comm.Iallgather(vec, rows), rows, vec

    def _finish_signature(self, pending, what, started: float) -> None:
        if pending is not None:
            request, rows, _vec = pending
            try:
                self.guard.wait(request.Test, what, started)
            except PeerFailedError:
                # a peer that saw a mismatch got the same signatures: ours complete at once,
                # and this rank reports the mismatch itself rather than only the peer's notice
                if _completes_within(request.Test, MISMATCH_GRACE_S):
                    self.guard.verify(rows, what)
                raise
            self.guard.verify(rows, what)

    def _begin(self, sig: CallSignature):
        """Post and complete the signature check; returns (label, start time)."""
        started = time.monotonic()
        pending = self._post_signature(sig)
        what = self._label(sig)
        self._finish_signature(pending, what, started)
        return what, started

    def _checked_while_travelling(self, sig: CallSignature, encoded: np.ndarray | None = None):
        """Post the signature check without waiting for it: ``(label, start time, check)``,
        ``check()`` true once every rank's signature has arrived and agrees (it raises the
        mismatch otherwise). For a collective whose data may be posted before the check
        completes: every rank posts the same check in program order, so it completes (or
        times out) whatever the data does, and a rank tests the check before the data.
        ``encoded``: as for :meth:`_post_signature`."""
        started = time.monotonic()
        pending = self._post_signature(sig, encoded=encoded)
        what = self._label(sig)
        if pending is None:
            return what, started, lambda: True
        request, rows, _vec = pending
        state = {"verified": False}

        def check() -> bool:
            if not state["verified"]:
                if not request.Test():
                    return False
                self.guard.verify(rows, what)
                state["verified"] = True
            return True

        return what, started, check

    def _checked_work(self, check, test, what, started: float, finish) -> Work:
        """A :class:`Work` of data ``test`` under the signature ``check`` of
        :meth:`_checked_while_travelling`: it completes when both have, and a rank told of a
        peer's failure first gives its own check the grace to report a mismatch itself."""
        def done() -> bool:
            return check() and test()

        def complete():
            try:
                self.guard.wait(done, what, started)
            except PeerFailedError:
                if _completes_within(lambda: _settles(check), MISMATCH_GRACE_S):
                    check()
                raise
            return finish()

        return Work(complete, test_fn=done)

    def _wait_request(self, request, what, started, finish=None) -> Work:
        return self._guarded_work(request.Test, what, started, finish)  # Test drives MPI

    def _threaded(self, sig: CallSignature, started: float, body, result,
                  inline: bool = False) -> Work:
        """Run ``body(barrier, wait, checked)`` on the communication thread after the
        signature check.

        ``barrier()`` synchronises the ranks; ``wait(requests)`` completes mpi4py requests;
        both on the thread's own communicator and under the guard's deadline. ``checked`` is
        True when a signature exchange took place, which every rank posted after writing its
        data: that exchange has synchronised the ranks already. ``inline``: a blocking call
        runs the body in the caller's thread when the communication thread is idle (the same
        order, two thread switches fewer).
        """
        pending = self._post_signature(sig)
        what = self._label(sig)
        MPI = self._MPI

        def wait(requests):
            self.guard.wait(lambda: MPI.Request.Testall(requests), what, started,
                            spin_s=RING_SPIN_S, yield_s=RING_YIELD_S)

        def barrier():
            request = self._ring_comm.Ibarrier()
            self.guard.wait(request.Test, what, started, spin_s=RING_SPIN_S,
                            yield_s=RING_YIELD_S)

        def job_body():
            work.started_at = time.perf_counter()
            self._finish_signature(pending, what, started)
            body(barrier, wait, pending is not None)
            work.finished_at = time.perf_counter()
            return result

        def finish():
            try:
                self.guard.wait(job.done.is_set, what, started, block=job.done.wait)
            except PeerFailedError:
                # the job may be about to find the same mismatch the peer reported
                if job.done.wait(MISMATCH_GRACE_S) and isinstance(job.error,
                                                                   CollectiveMismatchError):
                    raise job.error from None
                raise
            return job.outcome()

        if inline and self._get_worker().idle():
            work = Work(result=result)
            job_body()
            return work
        work = Work(finish)  # exists before the thread can touch it
        job = self._get_worker().submit(job_body)
        work._test_fn = job.done.is_set
        return work

    def alloc_buffer(self, numel: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """A zeroed tensor in shared memory when all ranks share one host (collective).

        :meth:`allreduce` of exactly this tensor then runs :func:`~.shm.shm_allreduce` on the
        communication thread. Elsewhere (several hosts, no ``/dev/shm``) ordinary memory.
        """
        numel = int(numel)
        if self._size == 1 or not shm_available():
            return torch.zeros(numel, dtype=dtype)
        self._begin(CallSignature("alloc_buffer", None, dtype, (numel,)))
        if self._peers_elsewhere().any():
            return torch.zeros(numel, dtype=dtype)
        prefix = self.broadcast_object(f"gnnscale-{os.getpid()}-{os.urandom(4).hex()}-"
                                       f"{len(self._shared)}" if self._rank == 0 else None)
        itemsize = torch.empty((), dtype=dtype).element_size()
        agree = lambda ok: all(self.allgather_object(bool(ok)))  # noqa: E731
        try:
            shared = SharedBuffer(prefix, self._rank, self._size, numel * itemsize, agree)
        except OSError:
            return torch.zeros(numel, dtype=dtype)  # every rank fell back together
        views = [shared.typed(q, dtype, numel) for q in range(self._size)]
        views[self._rank].zero_()
        self._shared[views[self._rank].data_ptr()] = (shared, views)
        return views[self._rank]

    def _peers_elsewhere(self) -> np.ndarray:
        """Per rank, whether it runs on another host than this one (collective the first
        time; every rank must also agree on the eager piece size then)."""
        if self._elsewhere is None:
            node = self.mpi_comm.Split_type(self._MPI.COMM_TYPE_SHARED)
            here = node.allgather(self._rank)
            node.Free()
            pieces = self.mpi_comm.allgather(self._piece_bytes)
            if len(set(pieces)) > 1:
                raise ValueError("ranks disagree on GNNSCALE_EAGER_PIECE_BYTES "
                                 f"({sorted(set(pieces))}): set it alike on every host")
            self._elsewhere = np.ones(self._size, dtype=bool)
            self._elsewhere[here] = False
        return self._elsewhere

    def free_buffer(self, tensor: torch.Tensor) -> None:
        self._shared.pop(tensor.data_ptr(), None)

    def _use_ring(self, tensor: torch.Tensor) -> bool:
        return (self._size > 1 and tensor.dtype in _RING_DTYPES
                and tensor.numel() * tensor.element_size() >= self.ring_min_bytes)

    def _get_worker(self) -> CommWorker:
        if self._worker is None:
            self._worker = CommWorker(f"gnnscale-comm-{self.name}")
        return self._worker

    # -- collectives ----------------------------------------------------------------------
    def allreduce(self, tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
        return self._allreduce(tensor, op, inline=True).wait()

    def allreduce_async(self, tensor: torch.Tensor, op: str = "sum") -> Work:
        return self._allreduce(tensor, op, inline=False)

    def _allreduce(self, tensor: torch.Tensor, op: str, inline: bool) -> Work:
        check_op(op)
        buffer = _as_numpy(tensor)  # validates device and layout
        if self._size == 1:
            return Work(result=tensor)
        sig = CallSignature("allreduce", op, tensor.dtype, tuple(tensor.shape))
        started = time.monotonic()
        nbytes = tensor.numel() * tensor.element_size()
        if self._sig_comm is not None and nbytes <= self._fused_bytes and \
                tensor.dtype in _FUSED_DTYPES:
            # the data rides in the signature exchange: one collective, reduced locally
            pending = self._post_signature(sig, buffer.reshape(-1).view(np.uint8))
            what = self._label(sig)
            self._finish_signature(pending, what, started)
            return Work(result=_reduce_rows(pending[1], signature_length(self._size), tensor,
                                            nbytes, op))
        shared = self._shared.get(tensor.data_ptr())
        if shared is not None and shared[1][self._rank].numel() == tensor.numel() and \
                shared[1][self._rank].dtype == tensor.dtype:
            sig = CallSignature("allreduce", op, tensor.dtype, tuple(tensor.shape), path=1)
            return self._threaded(sig, started, lambda barrier, _wait, checked: shm_allreduce(
                shared[1], self._rank, op, barrier, ready=checked), tensor, inline)
        if self._use_ring(tensor):
            return self._threaded(sig, started, lambda _barrier, wait, _checked: ring_allreduce(
                self._ring_comm, tensor.view(-1), op, wait), tensor, inline)
        what, started = self._begin(sig)
        if tensor.dtype in (torch.bfloat16, torch.float16):
            wide = tensor.float()
            request = self.mpi_comm.Iallreduce(self._MPI.IN_PLACE, _as_numpy(wide),
                                               op=self._ops[op])
            return self._wait_request(request, what, started, lambda: tensor.copy_(wide))
        request = self.mpi_comm.Iallreduce(self._MPI.IN_PLACE, buffer, op=self._ops[op])
        return self._wait_request(request, what, started, lambda: tensor)

    def reduce(self, tensor: torch.Tensor, root: int = 0, op: str = "sum") -> torch.Tensor:
        check_op(op)
        _as_numpy(tensor)
        if self._size == 1:
            return tensor
        what, started = self._begin(CallSignature("reduce", op, tensor.dtype,
                                                  tuple(tensor.shape), root))
        wide = tensor.float() if tensor.dtype in (torch.bfloat16, torch.float16) else tensor
        buffer = _as_numpy(wide)
        if self._rank == root:
            request = self.mpi_comm.Ireduce(self._MPI.IN_PLACE, buffer, op=self._ops[op], root=root)
        else:
            request = self.mpi_comm.Ireduce(buffer, None, op=self._ops[op], root=root)
        self._wait_request(request, what, started).wait()
        if wide is not tensor and self._rank == root:
            tensor.copy_(wide)
        return tensor

    def alltoallv_async(self, send: torch.Tensor, send_counts: Sequence[int],
                        recv_counts: Sequence[int]) -> Work:
        send = send.contiguous()
        elsewhere = None
        if self._size > 1:  # collective on the first call on every rank, before any post
            peers_elsewhere = self._peers_elsewhere()
            if self._piece_bytes and peers_elsewhere.any():
                elsewhere = peers_elsewhere
        layout = self._layouts.get(send, send_counts, recv_counts, elsewhere, self._piece_bytes)
        recv = torch.empty((layout.recv_rows, *send.shape[1:]), dtype=send.dtype)
        send_np, recv_np = _as_numpy(send).reshape(-1), _as_numpy(recv).reshape(-1)
        # the signature check travels with the data: a halo exchange is posted at once, not
        # after every rank has reached it (a rank that arrives first computes what overlaps
        # the exchange instead of waiting for the last at its post)
        what, started, check = self._checked_while_travelling(layout.signature, layout.encoded)
        try:
            MPI, comm = self._MPI, self.mpi_comm
            requests = [comm.Irecv(recv_np[lo:hi], peer, _TAG_EAGER_PIECE) if receive else
                        comm.Isend(send_np[lo:hi], peer, _TAG_EAGER_PIECE)
                        for receive, peer, lo, hi in layout.pieces]
            self.eager_pieces_posted += len(requests)
            requests.insert(0, comm.Ialltoallv([send_np, (layout.s_counts, layout.s_displs)],
                                               [recv_np, (layout.r_counts, layout.r_displs)]))
        except self._MPI.Exception:
            # counts that disagree can fail the post itself (a truncated message to this
            # rank): the signature check names the disagreement
            self.guard.wait(lambda: _settles(check), what, started)
            check()
            raise
        keep_alive = (send, send_np)  # MPI reads the send buffer until the wait
        test = requests[0].Test if len(requests) == 1 else (lambda: MPI.Request.Testall(requests))
        return self._checked_work(check, test, what, started, lambda: (keep_alive, recv)[1])

    def allgather(self, tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.contiguous()
        out = torch.empty((self._size, *tensor.shape), dtype=tensor.dtype)
        what, started = self._begin(CallSignature("allgather", None, tensor.dtype,
                                                  tuple(tensor.shape)))
        request = self.mpi_comm.Iallgather(_as_numpy(tensor).reshape(-1),
                                           _as_numpy(out).reshape(-1))
        return self._wait_request(request, what, started, lambda: out).wait()

    def broadcast(self, tensor: torch.Tensor, root: int = 0) -> torch.Tensor:
        check_root(root, self._size)
        buffer = _as_numpy(tensor).reshape(-1)
        what, started = self._begin(CallSignature("broadcast", None, tensor.dtype,
                                                  tuple(tensor.shape), root))
        request = self.mpi_comm.Ibcast(buffer, root=root)
        return self._wait_request(request, what, started, lambda: tensor).wait()

    def allgather_object(self, obj: Any) -> list:
        payload = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL),
                                dtype=np.uint8)
        what, started = self._begin(CallSignature("allgather_object"))
        lengths = np.empty(self._size, dtype=np.int64)
        self._wait_request(self.mpi_comm.Iallgather(np.array([payload.size], dtype=np.int64),
                                                    lengths), what, started).wait()
        data = np.empty(int(lengths.sum()), dtype=np.uint8)
        displs = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        request = self.mpi_comm.Iallgatherv(payload, [data, (lengths, displs)])
        self._wait_request(request, what, started).wait()
        return [pickle.loads(data[d:d + n].tobytes()) for d, n in zip(displs, lengths)]

    def barrier(self) -> None:
        what, started = self._begin(CallSignature("barrier"))
        self._wait_request(self.mpi_comm.Ibarrier(), what, started).wait()

    def split(self, color: int, key: int | None = None) -> "MPICommunicator":
        self._begin(CallSignature("split"))
        sub = self.mpi_comm.Split(int(color), self._rank if key is None else int(key))
        return MPICommunicator(sub, guard=self.guard.for_group(sub.Get_size()),
                               ring_min_bytes=self.ring_min_bytes,
                               name=f"{self.name}/split({int(color)})",
                               eager_piece_bytes=self._piece_bytes)

    def abort(self, exit_code: int = 1) -> None:
        self.guard.board.post(f"rank {self._MPI.COMM_WORLD.Get_rank()} called abort({exit_code})")
        self.abort_job(exit_code)

    def abort_job(self, exit_code: int = 1) -> None:
        """Abort every rank now, without a failure notice (the failure handler posts one)."""
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        abort_world(exit_code)
