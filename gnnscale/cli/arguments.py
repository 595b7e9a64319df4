"""Argument types and the dataset options shared by ``train``, ``partition`` and ``tune``."""

from __future__ import annotations

import argparse
import json


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def key_value(text: str) -> tuple[str, object]:
    """argparse type: ``KEY=VALUE``; VALUE is read as JSON when it parses (numbers, lists, null,
    true/false), else kept as a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return key, tuple(value) if isinstance(value, list) else value


def add_dataset_arguments(parser) -> None:
    """``--dataset``, ``--data-root``, ``--num-nodes``, ``--split``, ``--dataset-option``."""
    data = parser.add_argument_group("data")
    data.add_argument("--dataset", default="sbm",
                      help="dataset name (cora, citeseer, tolokers, facebook-combined, sbm, rmat, "
                           "...) or a path to a dataset file or folder")
    data.add_argument("--data-root", default=None,
                      help="folder holding named datasets (default $GNNSCALE_DATA_ROOT, else "
                           "./data; a name not found there is read from the repository's "
                           "datasets/ when gnnscale runs from a checkout that ships it)")
    data.add_argument("--download", action="store_true",
                      help="download a registered dataset (`gnnscale datasets list`) into "
                           "the data root when it is not there")
    data.add_argument("--num-nodes", type=positive_int, default=None,
                      help="size of a generated graph (sbm, rmat); None means the generator's "
                           "default")
    data.add_argument("--split", type=int, default=0,
                      help="which split to use where a dataset ships several")
    data.add_argument("--dataset-option", type=key_value, action="append", default=None,
                      metavar="KEY=VALUE",
                      help="loader or generator option, repeatable (e.g. scale=18, "
                           "num_features=128, scheme=time for OGB)")


def load_graph(args):
    """Load the dataset the shared data arguments name (downloading it with ``--download``)."""
    from ..data import load_dataset

    options = dict(args.dataset_option or [])
    if args.num_nodes:
        options["num_nodes"] = args.num_nodes
    return load_dataset(args.dataset, root=data_root_for(args), split=args.split, **options)


def data_root_for(args):
    """The data root to read ``args.dataset`` from (see :func:`resolve_data_root`); with
    ``--download``, a registered name missing from it is downloaded into it first."""
    from ..data.download import download_dataset
    from ..data.load import find_dataset
    from ..data.registry import registered

    root = resolve_data_root(args)
    if getattr(args, "download", False) and registered(str(args.dataset)) is not None and \
            find_dataset(str(args.dataset), root) is None:
        download_dataset(str(args.dataset), root)
    return root


def resolve_data_root(args):
    """``--data-root`` when given; else ``$GNNSCALE_DATA_ROOT`` or ``./data``, unless the named
    dataset is not there but in the ``datasets/`` folder of the checkout gnnscale runs from."""
    from ..data.load import default_root, find_dataset
    from ..data.registry import shipped_root

    if args.data_root is not None:
        return args.data_root
    root, shipped = default_root(), shipped_root()
    name = str(args.dataset)
    if find_dataset(name, root) is None and shipped is not None and \
            find_dataset(name, shipped) is not None:
        return shipped
    return root
