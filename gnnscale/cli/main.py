"""``gnnscale`` command line: ``train``, ``partition``, ``convert``, ``tune``, ``plan``, ``info``,
``plot``, ``datasets``."""

from __future__ import annotations

import importlib
import sys

from .common import OneLineParser, formatter, refuse, run_entry_point, user_error_types
from .outputs import check_outputs

# Sub-commands live one per module; each exposes add_parser(subparsers) and run(args).
SUBCOMMAND_MODULES = ("train_cmd", "partition_cmd", "convert_cmd", "tune_cmd", "plan_cmd",
                      "info_cmd", "plot_cmd", "datasets_cmd")


def build_parser() -> OneLineParser:
    """The top-level parser with every available sub-command registered."""
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
    """Entry point of the ``gnnscale`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
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
    return run_entry_point(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
