"""torch.distributed backend: gloo for CPU tensors, NCCL for CUDA tensors, one interface.

``TorchCommunicator.create()`` joins (or starts) the default process group:

- under ``torchrun``: the usual ``env://`` rendezvous (``MASTER_ADDR``/``MASTER_PORT``);
- under ``mpirun``/``mpiexec`` (or ``srun`` with MPI): no set-up needed. Rank 0 starts a
  ``TCPStore`` on a free port the operating system picks, and sends the address and port to the
  others through MPI. The address is ``127.0.0.1`` when all ranks share one host, else rank 0's
  host name (``GNNSCALE_MASTER_ADDR`` or ``MASTER_ADDR`` override it);
- under ``srun`` without MPI: ``MASTER_ADDR`` (default: the first host of the step's node list)
  and ``MASTER_PORT`` (default: derived from the job id), see :mod:`.launch`.

With CUDA available the group is ``cpu:gloo,cuda:nccl``: each call goes to NCCL or gloo by the
tensor's device, so the same communicator moves GPU gradients and CPU metadata.

Asynchronous work runs on the process group's own threads (gloo) or streams (NCCL); waits poll
it under the deadline of :mod:`.guard`. Signatures and failure notices travel over MPI when the
job was launched by ``mpirun`` (microseconds), else over a separate gloo group and the store.
"""

from __future__ import annotations

import atexit
import datetime
import gc
import os
import pickle
import socket
import threading
import time
import weakref
from typing import Any, Sequence

import numpy as np
import torch
import torch.distributed as dist

from ..errors import CommError
from .base import Work, check_alltoallv, check_op, check_root
from .guard import (CallSignature, FailureBoard, Guard, StoreFailureBoard, resolve_check,
                    resolve_timeout, signature_length)
from .guarded import GuardedCommunicator
from .launch import LaunchInfo, detect_launch, slurm_rendezvous
from .mpi_library import abort_world, load_mpi

#: seconds a rank that lost a peer's connection waits before it reports the failure and
#: aborts the job, so that the launcher, which sees the dead process too, names it first
LAUNCHER_FIRST_S = 2.0

_LIVE: "weakref.WeakSet[TorchCommunicator]" = weakref.WeakSet()  # released by _destroy
_REDUCE_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


def _mpi_world():
    """``MPI.COMM_WORLD`` if mpi4py is usable in this job (launched by an MPI launcher)."""
    try:
        MPI = load_mpi()
    except ImportError:
        return None
    return MPI.COMM_WORLD


def _same_host(world) -> bool:
    return len(set(world.allgather(socket.gethostname()))) == 1


def _groups_made() -> int:
    """How many process groups this process has made: torch's name for its next group with
    ``use_local_synchronization`` is a hash of the ranks and this count."""
    return len(dist.distributed_c10d._world.pg_names)


def _store_over_mpi(world, timeout: float):
    """Rank 0 starts a TCPStore on a free port and shares (address, port) through MPI."""
    rank, size = world.Get_rank(), world.Get_size()
    delta = datetime.timedelta(seconds=timeout)
    address = os.environ.get("GNNSCALE_MASTER_ADDR") or os.environ.get("MASTER_ADDR")
    if not address:
        address = "127.0.0.1" if _same_host(world) else socket.gethostname()
    store, error = None, None
    if rank == 0:
        try:
            store = dist.TCPStore(address, 0, size, is_master=True, wait_for_workers=False,
                                  timeout=delta)
        except Exception as exc:  # every rank must learn about it, not only rank 0
            error = f"rank 0 could not start the rendezvous store on {address}: {exc}"
    address, port, error = world.bcast((address, store.port if store else 0, error), root=0)
    if error:
        raise CommError(error)
    if rank != 0:
        store = dist.TCPStore(address, port, size, is_master=False, timeout=delta)
    return store


class _MPISignatures:
    """Signature allgathers on a duplicate MPI communicator (one tiny allgather per call)."""

    def __init__(self, mpi_comm):
        self.comm = mpi_comm.Dup()

    def post(self, vec: np.ndarray, size: int):
        rows = np.empty((size, vec.size), dtype=np.int64)
        request = self.comm.Iallgather(vec, rows)
        return request.Test, rows, lambda: (vec, request), None

    def split(self, color: int, key: int) -> "_MPISignatures":
        return _MPISignatures(self.comm.Split(color, key))


class _GlooSignatures:
    """Signature allgathers on a separate gloo group (when the job has no MPI)."""

    def __init__(self, group):
        self.group = group

    def post(self, vec: np.ndarray, size: int):
        out = torch.empty(size * vec.size, dtype=torch.int64)
        work = dist.all_gather_into_tensor(out, torch.from_numpy(vec), group=self.group,
                                           async_op=True)
        return work.is_completed, out.view(size, vec.size).numpy(), work.wait, \
            _completion_event(work)


class TorchCommunicator(GuardedCommunicator):
    """A communicator over a ``torch.distributed`` process group.

    Use :meth:`create` for the job's world; :meth:`split` for sub-groups.
    """

    backend = "torch"

    def __init__(self, group, global_ranks: Sequence[int], guard: Guard, signatures=None,
                 mpi_comm=None, name: str = "world"):
        self.group = group
        _LIVE.add(self)
        self._global_ranks = list(global_ranks)
        self._rank = dist.get_rank(group)
        self._size = len(self._global_ranks)
        self.guard = guard
        self._signatures = signatures
        self._sig_len = signature_length(self._size)
        self._mpi_comm = mpi_comm  # mirror of this group in MPI, when launched by mpirun
        self._init_calls()
        self.name = name

    @classmethod
    def create(cls, launch: LaunchInfo | None = None, timeout: float | None = None,
               check: bool | None = None, device: str | None = None) -> "TorchCommunicator":
        """Join the job's default process group (initialising it if needed); see the module doc.

        device: ``"cpu"`` (gloo only), ``"cuda"`` (gloo + NCCL) or None (CUDA if available).
        """
        launch = launch or detect_launch()
        timeout = resolve_timeout(timeout)
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device not in ("cpu", "cuda"):
            raise CommError(f"device must be 'cpu' or 'cuda', got {device!r}")
        if device == "cuda":
            if not torch.cuda.is_available():
                raise CommError("device 'cuda' asked for, but torch sees no CUDA device")
            torch.cuda.set_device(launch.local_rank % torch.cuda.device_count())
        backend = "cpu:gloo,cuda:nccl" if device == "cuda" else "gloo"
        world = _mpi_world() if launch.launcher in ("mpi", "slurm") else None
        if world is not None and world.Get_size() != launch.size and launch.size > 0:
            world = None  # srun without MPI wiring: mpi4py sees a world of one
        store = None
        if not dist.is_initialized():
            delta = datetime.timedelta(seconds=timeout)
            if launch.launcher == "torchrun":
                dist.init_process_group(backend, init_method="env://", timeout=delta)
            else:
                if world is not None:
                    store = _store_over_mpi(world, timeout)
                    rank, size = world.Get_rank(), world.Get_size()
                elif launch.launcher == "slurm":
                    address, port = slurm_rendezvous()
                    rank, size = launch.rank, launch.size
                    store = dist.TCPStore(address, port, size, is_master=rank == 0,
                                          timeout=delta)
                else:
                    rank, size = 0, 1
                    store = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, timeout=delta)
                dist.init_process_group(backend, store=store, rank=rank, world_size=size,
                                        timeout=delta)
            atexit.register(_destroy)
        rank, size = dist.get_rank(), dist.get_world_size()
        if store is None:
            store = dist.distributed_c10d._get_default_store()
        check = resolve_check(check) and size > 1
        if world is not None:
            from .mpi import world_failure_board

            board = world_failure_board()
            signatures = _MPISignatures(world) if check else None
        else:
            board = StoreFailureBoard(store, rank, size) if size > 1 else FailureBoard()
            signatures = _GlooSignatures(dist.new_group(backend="gloo")) if check else None
        guard = Guard(rank, size, timeout, check, board)
        return cls(dist.group.WORLD, range(size), guard, signatures, world)

    # -- plumbing -------------------------------------------------------------------------
    def _begin(self, sig: CallSignature):
        """Check the signature (blocking) before posting; returns (label, start time)."""
        started = time.monotonic()
        self._seq += 1
        what = self._label(sig)
        if self._signatures is not None:
            test, rows, finish, block = self._signatures.post(sig.encode(self._seq, self._size),
                                                              self._size)
            self.guard.wait(test, what, started, block=block)
            try:
                finish()
            except Exception as exc:  # gloo reports a dead peer as a connection error
                self._raise_failed(what, exc)
            self.guard.verify(rows, what)
        return what, started

    def _work(self, work, what, started, finish=None) -> Work:
        def complete():
            try:
                work.wait()
            except Exception as exc:  # gloo reports a dead peer as a connection error
                self._raise_failed(what, exc)
            return finish() if finish is not None else None

        return self._guarded_work(work.is_completed, what, started, complete,
                                  block=_completion_event(work))

    def _raise_failed(self, what, exc: Exception) -> None:
        self.guard._last_poll = 0.0  # read the board now: a notice names the failed rank
        self.guard.poll_board(what)
        # A peer's process is gone (gloo sees its connections close at once). Give the launcher
        # a moment to see it too: it then names that rank and its signal and ends the job, this
        # rank included. Aborting at once would have the launcher name this rank instead.
        time.sleep(LAUNCHER_FIRST_S)
        raise CommError(f"rank {self.guard.rank}: {what()} failed: {exc} (a rank has probably "
                        f"died; the launcher's log names it)") from exc

    # -- collectives ----------------------------------------------------------------------
    def allreduce_async(self, tensor: torch.Tensor, op: str = "sum") -> Work:
        check_op(op)
        if self._size == 1:
            return Work(result=tensor)
        what, started = self._begin(CallSignature("allreduce", op, tensor.dtype,
                                                  tuple(tensor.shape)))
        launched = time.perf_counter()
        work = dist.all_reduce(tensor, _REDUCE_OPS[op], group=self.group, async_op=True)
        handle = self._work(work, what, started, lambda: tensor)
        handle.started_at = launched
        return handle

    def reduce(self, tensor: torch.Tensor, root: int = 0, op: str = "sum") -> torch.Tensor:
        check_op(op)
        if self._size == 1:
            return tensor
        what, started = self._begin(CallSignature("reduce", op, tensor.dtype,
                                                  tuple(tensor.shape), root))
        work = dist.reduce(tensor, self._global_ranks[root], _REDUCE_OPS[op], group=self.group,
                           async_op=True)
        return self._work(work, what, started, lambda: tensor).wait()

    def alltoallv_async(self, send: torch.Tensor, send_counts: Sequence[int],
                        recv_counts: Sequence[int]) -> Work:
        send_counts, recv_counts = check_alltoallv(send, send_counts, recv_counts, self._size)
        send = send.contiguous()
        recv = torch.empty((sum(recv_counts), *send.shape[1:]), dtype=send.dtype,
                           device=send.device)
        if self._size == 1:
            return Work(result=recv.copy_(send))
        what, started = self._begin(CallSignature("alltoallv", None, send.dtype,
                                                  tuple(send.shape), -1, tuple(send_counts),
                                                  tuple(recv_counts)))
        work = dist.all_to_all_single(recv, send, recv_counts, send_counts, group=self.group,
                                      async_op=True)
        return self._work(work, what, started, lambda: (send, recv)[1])

    def allgather(self, tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.contiguous()
        out = torch.empty((self._size, *tensor.shape), dtype=tensor.dtype, device=tensor.device)
        if self._size == 1:
            return out.copy_(tensor.unsqueeze(0))
        what, started = self._begin(CallSignature("allgather", None, tensor.dtype,
                                                  tuple(tensor.shape)))
        work = dist.all_gather(list(out.unbind(0)), tensor, group=self.group, async_op=True)
        return self._work(work, what, started, lambda: out).wait()

    def broadcast(self, tensor: torch.Tensor, root: int = 0) -> torch.Tensor:
        check_root(root, self._size)
        if self._size == 1:
            return tensor
        what, started = self._begin(CallSignature("broadcast", None, tensor.dtype,
                                                  tuple(tensor.shape), root))
        work = dist.broadcast(tensor, self._global_ranks[root], group=self.group, async_op=True)
        return self._work(work, what, started, lambda: tensor).wait()

    def allgather_object(self, obj: Any) -> list:
        if self._size == 1:
            return [obj]
        payload = torch.frombuffer(bytearray(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)),
                                   dtype=torch.uint8)
        lengths = self.allgather(torch.tensor([payload.numel()], dtype=torch.int64)).view(-1)
        padded = torch.zeros(int(lengths.max()), dtype=torch.uint8)
        padded[:payload.numel()] = payload
        gathered = self.allgather(padded)
        return [pickle.loads(gathered[r, :int(n)].numpy().tobytes())
                for r, n in enumerate(lengths.tolist())]

    def barrier(self) -> None:
        self.allreduce(torch.zeros(1))

    def split(self, color: int, key: int | None = None) -> "TorchCommunicator":
        key = self._rank if key is None else int(key)
        entries = self.allgather_object((int(color), key, self._rank, _groups_made()))
        members = sorted((k, r) for c, k, r, _ in entries if c == int(color))
        made = {r: n for c, _, r, n in entries if c == int(color)}
        if len(set(made.values())) > 1:
            # torch names the new group by how many groups the process has made: members
            # that made different numbers would each wait for the others under another name
            raise ValueError(
                f"split({int(color)}): its ranks have made different numbers of torch process "
                f"groups (rank: groups {made}), so torch would wait forever for them to meet; "
                f"split (and make groups) on every rank in the same order")
        global_members = [self._global_ranks[r] for _, r in members]
        group = dist.new_group(global_members, use_local_synchronization=True,
                               sort_ranks=False)
        signatures = None
        if self._signatures is not None:
            if isinstance(self._signatures, _MPISignatures):
                signatures = self._signatures.split(int(color), key)
            else:
                signatures = _GlooSignatures(dist.new_group(
                    global_members, backend="gloo", use_local_synchronization=True,
                    sort_ranks=False))
        mpi_comm = self._mpi_comm.Split(int(color), key) if self._mpi_comm is not None else None
        sub = TorchCommunicator(group, global_members, self.guard.for_group(len(members)),
                                signatures, mpi_comm, name=f"{self.name}/split({int(color)})")
        return sub

    def abort(self, exit_code: int = 1) -> None:
        self.guard.board.post(f"rank {self.guard.rank} called abort({exit_code})")
        self.abort_job(exit_code)

    def abort_job(self, exit_code: int = 1) -> None:
        """End every rank now, without a failure notice (the failure handler posts one).

        Under MPI this is ``MPI_Abort``; otherwise this process exits and the launcher
        (torchrun, srun) stops the others, while ranks blocked in a collective read the notice.
        """
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        if self._mpi_comm is not None:
            abort_world(exit_code)
        os._exit(exit_code)


def _completion_event(work):
    """``Event.wait`` that returns when ``work`` completes (set by its future's callback), so a
    waiter blocks with the GIL released instead of polling (polling gloo was measured to add
    ~2 ms per call); None if the work has no future."""
    try:
        future = work.get_future()
    except (RuntimeError, AttributeError):
        return None
    event = threading.Event()
    future.add_done_callback(lambda _future: event.set())
    return event.wait


def _release_groups() -> None:
    """Drop every communicator's references to its process groups, so that each gloo group's
    destructor runs now and joins its worker threads (``destroy_process_group`` only
    unregisters a group; its threads live as long as a Python object refers to it)."""
    for comm in list(_LIVE):
        comm.group = None
        if isinstance(comm._signatures, _GlooSignatures):
            comm._signatures.group = None
    _LIVE.clear()
    gc.collect()


def _destroy() -> None:
    """Tear the process groups down before interpreter exit (gloo threads crash otherwise).

    A gloo worker thread drops a work item (and the tensors in it) just after completing it, so
    after the waiter has returned; if that drop runs while the interpreter is finalising, it
    aborts the process ("terminate called without an active exception", seen after the
    overlapped gradient allreduce and after a resumed run's last epoch). One last barrier,
    bounded by a timeout, lets the peers finish; then every group is destroyed and released, so
    its worker threads are joined while Python is still alive.
    """
    if dist.is_available() and dist.is_initialized():
        try:
            if dist.get_world_size() > 1 and dist.get_backend() == "gloo":
                dist.monitored_barrier(timeout=datetime.timedelta(seconds=10))
        except Exception:
            pass
        try:
            dist.destroy_process_group()
        except Exception:
            pass
    _release_groups()
