"""``gnnscale datasets list`` and ``gnnscale datasets download NAME``: the public sets gnnscale
reads, where they are, and fetching them."""

from __future__ import annotations

import json

from .common import OneLineParser, formatter, say


def add_parser(subparsers) -> None:
    """Register ``datasets`` with its ``list`` and ``download`` actions."""
    p = subparsers.add_parser(
        "datasets", help="list the downloadable datasets or download one",
        description="The public datasets gnnscale reads by name (Planetoid, heterophilous "
                    "graphs, SNAP, OGB node-property): list them with where each is found, or "
                    "download one from its publisher into the data root (checked against its "
                    "SHA-256 or announced length, resumable, installed atomically).",
        formatter_class=formatter)
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=OneLineParser)
    actions.required = True
    listing = actions.add_parser("list", help="every downloadable dataset and its status",
                                 formatter_class=formatter)
    _add_root(listing)
    listing.add_argument("--json", action="store_true", help="print the list as JSON")
    listing.set_defaults(func=run_list)
    fetch = actions.add_parser("download", help="download datasets into the data root",
                               formatter_class=formatter)
    fetch.add_argument("names", nargs="+", metavar="NAME",
                       help="dataset name(s) from `gnnscale datasets list`")
    _add_root(fetch)
    fetch.add_argument("--base-url", default=None,
                       help="fetch from a mirror laid out as BASE/<source>/<file> instead of "
                            "the publishers ($GNNSCALE_DOWNLOAD_BASE_URL)")
    fetch.add_argument("--no-progress", action="store_true", help="no progress bar")
    fetch.add_argument("--timeout", type=float, default=60.0,
                       help="seconds a silent connection is waited for before giving up")
    fetch.set_defaults(func=run_download,
                       outputs=lambda args: [(_root(args), "--data-root", "folder")])


def _add_root(parser) -> None:
    parser.add_argument("--data-root", default=None,
                        help="data root (default $GNNSCALE_DATA_ROOT, else ./data)")


def _root(args):
    from ..data.load import default_root

    return args.data_root if args.data_root is not None else default_root()


def dataset_rows(root) -> list[dict]:
    """One dict per registered dataset: name, source, size, where it is found, description."""
    from ..data.load import find_dataset
    from ..data.registry import REGISTRY, shipped_root

    shipped = shipped_root()
    rows = []
    for entry in REGISTRY.values():
        here = find_dataset(entry.name, root)
        there = find_dataset(entry.name, shipped) if shipped is not None and here is None \
            else None
        status = (f"on disk: {here}" if here is not None else
                  f"shipped: {there}" if there is not None else "not downloaded")
        rows.append({"name": entry.name, "source": entry.source, "size": entry.size or "?",
                     "status": status, "url": entry.url(entry.files[0]),
                     "licence": entry.licence, "description": entry.description})
    return rows


def run_list(args) -> int:
    """Print the registry with each dataset's status under the data root, then the other
    names ``--dataset`` takes (together: :data:`gnnscale.data.load.DATASET_NAMES`)."""
    from ..data.load import GENERATED, SHIPPED_ONLY

    rows = dataset_rows(_root(args))
    if args.json:
        say(json.dumps(rows, indent=1))
        return 0
    width = max(len(r["name"]) for r in rows)
    size_width = max(len(r["size"]) for r in rows)
    say(f"data root {_root(args)}; `gnnscale datasets download NAME` fetches one")
    for r in rows:
        say(f"{r['name']:<{width}}  {r['source']:<13}  {r['size']:>{size_width}}  "
            f"{r['description']}  [{r['status']}]")
    say(f"also by name: {', '.join(SHIPPED_ONLY)} (in the checkout's datasets/, not "
        f"downloadable); {', '.join(GENERATED)} (generated)")
    return 0


def run_download(args) -> int:
    """Download each named dataset (names are checked before any transfer starts)."""
    from ..data.download import download_dataset
    from ..data.registry import entry_for

    entries = [entry_for(name) for name in args.names]
    root = _root(args)
    for entry in entries:
        folder = download_dataset(entry.name, root, base_url=args.base_url,
                                  progress=not args.no_progress, timeout=args.timeout)
        say(f"{entry.name}: installed in {folder}")
    return 0
