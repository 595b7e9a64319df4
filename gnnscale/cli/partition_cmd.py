"""``gnnscale partition``: partition a dataset and write a partition store (one file per rank)."""

from __future__ import annotations

import shlex

from . import memory_check
from .arguments import add_dataset_arguments, balance_params, key_value, load_graph, positive_int
from ..comm import env_rank
from .common import formatter, mpirun_words, say


def method_params(args) -> dict:
    """Partitioner keyword parameters from ``--param`` and ``--balance``."""
    return {**dict(args.param or []), **balance_params(args.balance, args.method, "--method")}


def add_parser(subparsers) -> None:
    """Register ``partition`` with every option and its default."""
    from partitioning import PARTITIONERS

    p = subparsers.add_parser(
        "partition", help="partition a dataset into a store that ranks read one part each",
        description="Partition a dataset and write a partition store: a manifest (format "
                    "version, graph statistics, method, parameters, checksums) and one file per "
                    "part with the owned nodes, local CSR with halo columns, send/receive "
                    "lists, features, labels and masks. `mpirun -n PARTS gnnscale train "
                    "--partitions OUT` then makes each rank read only its own part.",
        formatter_class=formatter)
    add_dataset_arguments(p)
    part = p.add_argument_group("partitioning")
    part.add_argument("--method", default="metis", choices=sorted(PARTITIONERS),
                      help="partitioner (edge cut: random, block, metis, kaminpar, ldg, "
                           "fennel; vertex cut: libra, hdrf)")
    part.add_argument("--parts", type=positive_int, required=True,
                      help="number of parts (= MPI ranks that will train on the store)")
    part.add_argument("--seed", type=int, default=0, help="partitioner seed")
    part.add_argument("--balance", default=None,
                      help="metis, kaminpar: comma-separated balance targets from nodes, "
                           "edges, train (e.g. nodes,edges,train); default: the method's own "
                           "(nodes)")
    part.add_argument("--param", type=key_value, action="append", default=None,
                      metavar="KEY=VALUE",
                      help="extra partitioner parameter, repeatable (e.g. slack=1.05, "
                           "passes=3, imbalance=0.05)")
    out = p.add_argument_group("output")
    out.add_argument("--out", required=True, metavar="DIR",
                     help="store folder to create (with its parent folders)")
    out.add_argument("--overwrite", action="store_true",
                     help="replace an existing store at --out (atomically) instead of refusing")
    out.add_argument("--feature-bytes", type=positive_int, default=None,
                     help="bytes per feature row for the halo-volume report; default: "
                          "4 x the dataset's feature width")
    memory_check.add_memory_plan_argument(part)
    p.set_defaults(func=run, outputs=lambda args: [(args.out, "--out", "renamed-folder")])


def run(args) -> int:
    """Partition, print the quality table, write the store. Returns the exit code."""
    from partitioning import format_summary_table, make_partitioner, part_summary
    from pathlib import Path

    from partitioning.local_view import PartViewBuilder
    from partitioning.store import check_target

    from .resource_use import Stopwatch

    clock = Stopwatch()
    check_target(args.out, args.overwrite)  # fail before the long work, write nothing
    partitioner = make_partitioner(args.method, num_parts=args.parts, seed=args.seed,
                                   **method_params(args))
    data = load_graph(args)
    if env_rank() != 0:  # under a launcher the store is written once, by rank 0
        return 0
    say(f"gnnscale partition: {data.summary()}")
    memory_check.check_partitioning(data, parts=args.parts, method=args.method,
                                    layout=memory_check.layout_of(args.dataset, args.data_root),
                                    ignore=args.ignore_memory_plan)
    partition = partitioner.fit(data)
    say(f"partitioned with {args.method} in {partition.time_s:.1f} s")
    row_bytes = args.feature_bytes or 4 * max(data.num_features, 1)
    builder = None
    if partition.kind == "edge_cut":  # its halos serve the table and the store
        spill_dir = Path(args.out).absolute().parent  # same file system as the store
        spill_dir.mkdir(parents=True, exist_ok=True)
        builder = PartViewBuilder.for_graph(data, partition.node_parts, partition.num_parts,
                                            spill_dir=spill_dir)
    try:
        say(format_summary_table(part_summary(data, partition, feature_bytes_per_row=row_bytes,
                                              builder=builder)))
        manifest = _write(args, data, partition, builder)
    finally:
        if builder is not None:
            builder.close()
    size = sum(e["bytes"] for e in manifest["parts"]) + sum(
        e["bytes"] for e in manifest["files"].values())
    run = shlex.join([*mpirun_words(args.parts), "gnnscale", "train", "--partitions",
                      str(args.out)])
    say(f"wrote {args.out}: {args.parts} parts, {size / 2**20:,.1f} MiB (run: {run})")
    say(f"done in {clock.report()}")
    return 0


def _write(args, data, partition, builder):
    from partitioning.store import write_store

    from .resource_use import part_progress

    masks = {"train": data.train_mask, "val": data.val_mask, "test": data.test_mask}
    bar = part_progress(args.parts, "writing parts")
    try:
        return write_store(args.out, data, partition, x=data.x, y=data.y, masks=masks,
                           extra_meta={"dataset": data.name, "split": args.split,
                                       "num_classes": data.num_classes},
                           overwrite=args.overwrite, on_part=lambda _part: bar.update(1),
                           builder=builder)
    finally:
        bar.close()
