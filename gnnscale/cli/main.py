"""``gnnscale`` command line: ``train``, ``partition``, ``convert``, ``tune``, ``plan``, ``info``,
``plot``, ``datasets``.

This module imports nothing heavy at its top: the console script imports it before calling
:func:`main`, and a Ctrl-C while torch and the rest load must end quietly (exit code 130), which
only :func:`main` can see to.
"""

from __future__ import annotations

import importlib
import signal
import sys

from . import EXIT_INTERRUPTED
from .interrupts import remembering, stop_if_signalled

# Sub-commands live one per module; each exposes add_parser(subparsers) and run(args).
SUBCOMMAND_MODULES = ("train_cmd", "partition_cmd", "convert_cmd", "tune_cmd", "plan_cmd",
                      "info_cmd", "plot_cmd", "datasets_cmd")


def build_parser():
    """The top-level parser (a :class:`~gnnscale.cli.common.OneLineParser`) with every
    available sub-command registered."""
    from .common import OneLineParser, formatter

    parser = OneLineParser(prog="gnnscale", formatter_class=formatter,
                           description="Full-batch distributed GNN training over MPI.")
    parser.add_argument("--version", action="version", version=f"gnnscale {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND",
                                       parser_class=OneLineParser)
    subparsers.required = True
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__package__}.{name}":
                continue  # that sub-command is not part of this build
            raise
        module.add_parser(subparsers)
    parser.commands = subparsers.choices
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gnnscale")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def main(argv=None) -> int:
    """Entry point of the ``gnnscale`` console script. Ctrl-C before the command runs (while
    modules load) exits with code 130 quietly, no traceback; during the command, the
    command says where it stopped (``train``: see :func:`gnnscale.cli.train_cmd.run`). A Ctrl-C
    whose KeyboardInterrupt an import dropped stops the command before it starts."""
    with remembering():
        try:
            return _main(argv)
        except KeyboardInterrupt:  # nothing has run yet: nothing to say beyond the shell's ^C
            return EXIT_INTERRUPTED


def _main(argv) -> int:
    from ..comm import env_rank
    from .common import refuse, run_entry_point, user_error_types
    from .outputs import check_outputs

    parser = build_parser()
    args = parser.parse_args(argv)
    args.command_line = list(sys.argv[1:] if argv is None else argv)  # `train`'s resume line
    check = getattr(args, "check", None)
    if check is not None:  # option combinations, refused before anything is loaded
        try:
            check(args)
        except user_error_types() as exc:
            parser.commands[args.command].error(str(exc))
    outputs = getattr(args, "outputs", None)
    if outputs is not None:  # every file and folder the command will write, checked now
        try:
            check_outputs(outputs(args))
        except user_error_types() as exc:
            return refuse(f"gnnscale {args.command}: error: {exc}")
    inputs = getattr(args, "inputs", None)
    # the dataset is there, found as its loader finds it, before torch: checked by rank 0 (its
    # exit ends the job); another host may hold other files, so the other ranks find theirs
    # when they load it, and name their rank and host if it is missing there
    if inputs is not None and env_rank() == 0:
        try:
            inputs(args)
        except user_error_types() as exc:
            return refuse(f"gnnscale: error: {exc}")  # the line loading it would print
    _load_holding_interrupts(getattr(args, "compiled_modules", lambda _args: ())(args))
    stop_if_signalled()  # a Ctrl-C dropped while modules loaded
    return run_entry_point(args.func, args)


def _load_holding_interrupts(modules) -> None:
    """Import ``modules`` (torch, for the commands that train) with SIGINT held back.

    A KeyboardInterrupt raised while torch initialises its compiled extension (Python code that
    C++ calls back through pybind11) aborts the interpreter ("terminate called after throwing
    an instance of 'pybind11::error_already_set'", exit -6). Held back by this thread's signal
    mask, a Ctrl-C in that window arrives as the mask is restored, where Python raises it as
    the KeyboardInterrupt :func:`main` turns into exit code 130. Threads started meanwhile
    inherit the mask, so the signal still comes to this thread.
    """
    masks = bool(modules) and hasattr(signal, "pthread_sigmask")  # none on some platforms
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if masks else None
    try:
        for name in modules:
            __import__(name)
    finally:
        if masks:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)


if __name__ == "__main__":
    sys.exit(main())
