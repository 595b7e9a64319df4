"""``gnnscale`` command line: ``train``, ``partition``, ``convert``, ``tune``, ``info``, ``plot``,
``datasets``."""

from __future__ import annotations

import importlib
import sys

from .common import OneLineParser, formatter, run_entry_point

# Sub-commands live one per module; each exposes add_parser(subparsers) and run(args).
SUBCOMMAND_MODULES = ("train_cmd", "partition_cmd", "convert_cmd", "tune_cmd", "info_cmd",
                      "plot_cmd", "datasets_cmd")


def build_parser() -> OneLineParser:
    """The top-level parser with every available sub-command registered."""
    parser = OneLineParser(prog="gnnscale", formatter_class=formatter,
                           description="Full-batch distributed GNN training over MPI.")
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
    return parser


def main(argv=None) -> int:
    """Entry point of the ``gnnscale`` console script."""
    args = build_parser().parse_args(argv)
    return run_entry_point(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
