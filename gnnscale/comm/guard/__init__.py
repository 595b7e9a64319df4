"""Never hang silently: checked collectives, deadlines, and job-wide failure notices.

Three mechanisms, shared by the multi-rank backends:

- **Checked mode** (on by default; ``init(check=False)`` or ``GNNSCALE_COMM_CHECK=0`` turns it
  off): before each collective every rank contributes a small fixed-size signature (call number,
  kind, op, dtype, element count, root, alltoallv counts) to an allgather on a side channel, and
  every rank compares them. A mismatch (say rank 1 reduces float64 while rank 0 reduces float32,
  or rank 0's send counts disagree with rank 1's receive counts) raises
  :class:`CollectiveMismatchError` on every rank, naming the ranks and their calls, within
  microseconds instead of hanging or corrupting memory. It costs one tiny allgather per call
  (``benchmarks/allreduce_bench.py``'s ``gnnscale-mpi-unchecked`` measures the difference).
- **Deadlines**: every wait polls its request and gives up after ``timeout`` seconds (default
  :data:`DEFAULT_TIMEOUT_S`, ``init(timeout=...)`` or ``GNNSCALE_COMM_TIMEOUT``) with
  :class:`CommTimeoutError`.
- **Failure notices**: :func:`install_failure_handler` replaces ``sys.excepthook`` so that a rank
  dying of an uncaught exception first posts "rank r failed: ..." on a :class:`FailureBoard`
  (an MPI side communicator, or the torch.distributed store), gives the others a moment to read it,
  then aborts the job. Ranks blocked in a collective read the notice while they poll and raise
  :class:`PeerFailedError` naming the failed rank; ranks busy computing are killed by the abort.
  Without this, an exception on one mpi4py rank leaves the others blocked forever (and the failed
  rank itself hangs in ``MPI_Finalize``). A rank killed by a signal is handled by the launcher
  (``mpirun`` and ``torchrun`` both take the whole job down and name the rank).

The modules: :mod:`.settings` (timeout, checked mode, polling intervals), :mod:`.signatures`
(checked mode), :mod:`.boards` (failure notices), :mod:`.waiting` (:class:`Guard`: deadlines and
the board while waiting) and :mod:`.failure_hook` (the exception hook).
"""

from .boards import FailureBoard, MPIFailureBoard, StoreFailureBoard
from .failure_hook import install_failure_handler, report_failure
from .settings import (DEFAULT_TIMEOUT_S, ENV_CHECK, ENV_TIMEOUT, resolve_check,
                       resolve_timeout)
from .signatures import (CallSignature, CollectiveMismatchError, exchange_length, find_mismatch,
                         fused_payload_bytes, signature_length)
from .waiting import CommTimeoutError, Guard, PeerFailedError

__all__ = ["CallSignature", "CollectiveMismatchError", "CommTimeoutError", "DEFAULT_TIMEOUT_S",
           "ENV_CHECK", "ENV_TIMEOUT", "FailureBoard", "Guard", "MPIFailureBoard",
           "PeerFailedError", "StoreFailureBoard", "exchange_length", "find_mismatch",
           "fused_payload_bytes", "install_failure_handler", "report_failure", "resolve_check",
           "resolve_timeout", "signature_length"]
