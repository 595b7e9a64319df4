"""What every sub-command shares: one-line errors, rank-aware printing, agreed failures."""

from __future__ import annotations

import argparse
import os
import re
import socket
import sys
import traceback
from contextlib import contextmanager

from ..comm import env_rank
from ..errors import GnnscaleError
from . import EXIT_INTERRUPTED

EXIT_USAGE = 2


def user_error_types() -> tuple:
    """Exception types that mean bad input (printed as one line, exit code 2)."""
    from partitioning import PartitionError

    return (GnnscaleError, PartitionError)


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line (``gnnscale train: error: ...``), exit 2.

    Under a launcher only rank 0 prints; every rank exits with code 2. Option prefixes are not
    expanded (``--epoch`` is an error, not ``--epochs``), so a typo never changes a run silently.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        if args is not None:
            args = self._attach_dash_values(list(args))
        return super().parse_known_args(args, namespace)

    def _attach_dash_values(self, args: list) -> list:
        """``--network -5,10`` -> ``--network=-5,10``: a value after an option that takes one,
        starting with a dash and a digit (argparse would read it as an option and say only
        "expected one argument"), so the option's own check names what is wrong with it."""
        takes_one = {option for action in self._actions if action.nargs is None
                     and action.option_strings for option in action.option_strings}
        out = []
        for word in args:
            if out and out[-1] in takes_one and re.match(r"-[\d.]", str(word)) \
                    and word not in self._option_string_actions:
                out[-1] = f"{out[-1]}={word}"
            else:
                out.append(word)
        return out

    def error(self, message: str):
        sys.exit(refuse(f"{self.prog}: error: {message} (see `{self.prog} --help`)"))


def refuse(line: str) -> int:
    """Before the ranks talk to each other, for an error every rank finds alike: rank 0 prints
    ``line``; the others wait for it (:func:`let_rank_0_report`). Returns the usage exit code."""
    if env_rank() == 0:
        print(line, file=sys.stderr, flush=True)
    let_rank_0_report()
    return EXIT_USAGE


#: seconds the other ranks wait before exiting on a user error that rank 0 reports
REPORT_GRACE_S = 2.0


def let_rank_0_report() -> None:
    """On ranks other than 0: wait a moment before exiting with an argument error rank 0
    reports.

    The launcher takes the whole job down as soon as one rank exits with a non-zero code; a
    rank that got there first (rank 0 may still be importing) would otherwise kill rank 0
    before its line is written. (Errors the ranks agree on need no wait: rank 0 has passed
    the agreement, and MPI's finalisation waits for it.)"""
    if env_rank() != 0:
        import time

        time.sleep(REPORT_GRACE_S)


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: X)`` to an option's help only where X tells something: not for
    required options, switches, options whose help states the default in words, or None."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.required or any(action.default is v for v in (None, False, argparse.SUPPRESS)) \
                or "default:" in text:
            return text
        return super()._get_help_string(action)


def formatter(prog):
    """The help formatter of every gnnscale command."""
    return _HelpFormatter(prog, max_help_position=32)


def say(*args, **kwargs) -> None:
    """Print on rank 0 only."""
    if env_rank() == 0:
        print(*args, **kwargs, flush=True)


class AgreedError(GnnscaleError):
    """A user error that every rank knows about (so rank 0 alone reports it)."""


@contextmanager
def agreed_failure(comm):
    """Run a set-up block on every rank; if any rank hits a user error, all ranks raise it.

    Without this, a rank that fails to read its input would exit while the others block in
    the next collective. Errors other than user errors still propagate (and abort the job).
    A job spread over several hosts names the failing rank's host too.
    """
    message = None
    try:
        yield
    except user_error_types() as exc:
        message = str(exc)
    gathered = comm.allgather_object((message, socket.gethostname()))
    hosts = {host for _, host in gathered}
    failed = [(rank, msg, host) for rank, (msg, host) in enumerate(gathered) if msg is not None]
    if failed:
        rank, msg, host = failed[0]
        everywhere = len(failed) == comm.size and len({m for _, m, _ in failed}) == 1
        where = f"rank {rank} on {host}" if len(hosts) > 1 else f"rank {rank}"
        raise AgreedError(msg if everywhere or comm.size == 1 else f"{where}: {msg}")


def run_entry_point(func, args) -> int:
    """Call ``func(args)`` turning failures into exit codes.

    User errors: one line on stderr (rank 0 when all ranks agree, else the failing rank), exit 2.
    Anything else: the traceback of the failing rank, then the whole job is aborted so no other
    rank waits forever in a collective.
    """
    try:
        return int(func(args) or 0)
    except user_error_types() as exc:
        agreed = isinstance(exc, AgreedError)
        if not agreed or env_rank() == 0:
            where = "" if agreed or env_rank() == 0 else f" (rank {env_rank()})"
            print(f"gnnscale: error{where}: {exc}", file=sys.stderr, flush=True)
        if not agreed:
            # Other ranks may be waiting in a collective (and MPI_Finalize would wait for
            # them): take the whole job down with the usage exit code.
            _abort_job(EXIT_USAGE)
        return EXIT_USAGE
    except KeyboardInterrupt:  # the command said where it stopped, if it had anything to say
        return EXIT_INTERRUPTED
    except Exception as exc:  # a crash: report it and take the whole job down
        if interrupted(exc):
            return EXIT_INTERRUPTED
        rank = env_rank()
        print(f"gnnscale: rank {rank} failed:\n{traceback.format_exc()}", file=sys.stderr,
              flush=True)
        _abort_job(1)
        return 1


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is Ctrl-C's KeyboardInterrupt or was raised because of one (a compiled
    kernel interrupted mid-call raises SystemError with the KeyboardInterrupt as its cause)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _abort_job(code: int) -> None:
    if "mpi4py" in sys.modules:
        from ..comm.mpi_library import abort_world, load_mpi

        MPI = load_mpi()
        if MPI.Is_initialized() and not MPI.Is_finalized() and MPI.COMM_WORLD.Get_size() > 1:
            sys.stdout.flush()
            sys.stderr.flush()
            abort_world(code)


def mpirun_words(ranks: int) -> list[str]:
    """``mpirun -n RANKS`` as it runs on this machine: with ``--oversubscribe`` where there are
    more ranks than cores, and ``--allow-run-as-root`` for root (Open MPI refuses both
    otherwise); for the commands gnnscale suggests."""
    words = ["mpirun", "-n", str(ranks)]
    if ranks > len(os.sched_getaffinity(0)):
        words.append("--oversubscribe")
    if os.geteuid() == 0:
        words.append("--allow-run-as-root")
    return words
