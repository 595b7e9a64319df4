"""``gnnscale convert``: write any supported dataset once as a memory-mapped graph folder."""

from __future__ import annotations

from .arguments import add_dataset_arguments, load_graph
from .common import formatter, say


def add_parser(subparsers) -> None:
    """Register ``convert`` with every option and its default."""
    p = subparsers.add_parser(
        "convert", help="write a dataset as a memory-mapped graph folder (fast to load)",
        description="Read a dataset in any supported layout (or generate one) and write it as "
                    "gnnscale's own binary folder: a manifest with counts, dtypes and the sha256 "
                    "of every file, and .npy arrays (CSR, features, labels, masks, degrees). "
                    "`train`, `partition`, `tune` and `info` take that folder as --dataset and "
                    "open it memory-mapped: loading is near-instant and rows are read only "
                    "when a part needs them.",
        formatter_class=formatter)
    add_dataset_arguments(p)
    out = p.add_argument_group("output")
    out.add_argument("--out", required=True, metavar="DIR",
                     help="folder to create (missing parent folders are created)")
    out.add_argument("--overwrite", action="store_true",
                     help="replace an existing converted graph at --out (atomically)")
    p.set_defaults(func=run, outputs=lambda args: [(args.out, "--out", "renamed-folder")])


def run(args) -> int:
    """Load (or generate), write the folder, print what was written with time and memory."""
    from pathlib import Path

    from ..data.converted import _check_target, is_converted, verify_converted, write_converted
    from .resource_use import Stopwatch, byte_progress

    clock = Stopwatch()
    out = Path(args.out).absolute()
    _check_target(out, args.overwrite)  # fail before the long work
    source = Path(args.dataset)
    if source.is_dir() and is_converted(source):
        verify_converted(source)  # full checksum pass before copying a converted folder
    data = load_graph(args)
    loaded = clock.elapsed()
    say(f"gnnscale convert: {data.summary()} (loaded in {loaded:.1f} s)")
    total = (data.indptr.nbytes + data.indices.nbytes + data.x.nbytes + data.y.nbytes
             + 3 * data.num_nodes + 16 * data.num_nodes)
    bar = byte_progress(total, "writing")
    try:
        manifest = write_converted(data, out, overwrite=args.overwrite, source=args.dataset,
                                   on_bytes=bar.update)
    finally:
        bar.close()
    size = sum(entry["bytes"] for entry in manifest["files"].values())
    say(f"wrote {out}: {size / 2**20:,.1f} MiB in {len(manifest['files'])} arrays; "
        f"{clock.report()} (use: --dataset {args.out})")
    return 0
