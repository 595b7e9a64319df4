"""``gnnscale plan``: the memory plan of one configuration, before anything runs."""

from __future__ import annotations

from .arguments import add_dataset_arguments, load_graph, positive_int
from .common import formatter, say

MODES = {"train": "in-memory", "train-store": "store", "partition": "partition"}


def add_parser(subparsers) -> None:
    """Register ``plan`` with every option and its default."""
    from partitioning import PARTITIONERS

    from .arguments import add_model_arguments

    p = subparsers.add_parser(
        "plan", help="predict the peak memory of every rank and phase of one run",
        description="Predict, per rank and per phase (load, partition, store, setup, train, "
                    "eval), the peak resident memory of one configuration "
                    "(planning.memory_plan) and print the largest rank and the phase "
                    "that sets it. Sizes come from the dataset, or from a store's manifest "
                    "with --partitions.",
        formatter_class=formatter)
    add_dataset_arguments(p)
    add_model_arguments(p, planning=True)
    run_opts = p.add_argument_group("run")
    run_opts.add_argument("--parts", type=positive_int, default=None,
                          help="ranks (= parts) of the run; default: 1, or with --partitions "
                               "the store's part count")
    run_opts.add_argument("--ranks-per-host", type=positive_int, default=None,
                          help="ranks sharing each host's memory, filling hosts in rank "
                               "order: adds each host's memory (the sum over its ranks) and "
                               "the largest host; default: every rank on one host")
    run_opts.add_argument("--method", default="metis", choices=sorted(PARTITIONERS),
                          help="partitioner")
    run_opts.add_argument("--mode", default="train", choices=sorted(MODES),
                          help="train: `gnnscale train` in memory (every rank loads the graph, "
                               "rank 0 partitions); train-store: `train --partitions`; "
                               "partition: `gnnscale partition`")
    run_opts.add_argument("--partitions", default=None, metavar="DIR",
                          help="plan training from this partition store (sizes from its "
                               "manifest; implies --mode train-store)")
    run_opts.add_argument("--exact", action="store_true",
                          help="partition the graph to plan with the real per-part sizes "
                               "(default: balanced parts, every edge a halo edge)")
    p.set_defaults(func=run)


def run(args) -> int:
    """Print the plan's table, its peak and the memory per host. Returns the exit code."""
    from partitioning import make_partitioner
    from planning.memory_plan import DatasetShape, balanced_workload, format_plan, plan_memory
    from planning.workload import part_workload

    from .memory_check import available_bytes, layout_of, model_options, plan_for_store
    from .tune_cmd import model_spec

    if args.partitions:
        args.parts = store_parts(args.partitions, args.parts)
        plan = plan_for_store(args.partitions, args.parts, model_options(args))
        say(f"gnnscale plan: training from store {args.partitions} on {args.parts} rank(s)")
    else:
        args.parts = args.parts or 1
        data = load_graph(args)
        shape = DatasetShape.of(data, layout_of(args.dataset, args.data_root))
        spec = model_spec(args, data)
        if args.exact:
            partition = make_partitioner(args.method, num_parts=args.parts, seed=0).fit(data)
            work = part_workload(data, partition)
        else:
            work = balanced_workload(shape, args.parts)
        mode = MODES[args.mode]
        plan = plan_memory(shape, spec, work, mode=mode,
                           partition_method=args.method if args.parts > 1 or
                           mode == "partition" else None)
        say(f"gnnscale plan: {data.summary()}; {args.model} x {args.layers} layers, "
            f"{args.parts} rank(s), {args.method}, mode {args.mode} "
            f"({'exact parts' if args.exact else 'balanced parts'}, layout {shape.layout})")
    say(format_plan(plan))
    say(format_hosts(plan, args.ranks_per_host))
    say(f"this host has {available_bytes() / 2**30:.2f} GiB available now")
    return 0


def store_parts(store, parts: int | None) -> int:
    """The part count of partition store ``store``; ``--parts`` must agree with it."""
    from partitioning.store import read_manifest

    from ..errors import UsageError

    count = int(read_manifest(store)["partition"]["num_parts"])
    if parts is not None and parts != count:
        raise UsageError(f"--parts {parts} contradicts --partitions {store}, which holds {count} "
                         f"parts (training from it takes {count} ranks); leave --parts out")
    return count


def host_peaks(per_rank, ranks_per_host: int | None) -> list[float]:
    """Bytes per host: the sum of its ranks' ``per_rank`` figures, ranks filling hosts in order
    (``ranks_per_host`` None: every rank on one host)."""
    per_rank = [float(v) for v in per_rank]
    step = ranks_per_host or len(per_rank)
    return [sum(per_rank[i:i + step]) for i in range(0, len(per_rank), step)]


def format_hosts(plan: dict, ranks_per_host: int | None) -> str:
    """One line: the largest host's memory (lean, and with freed memory kept where the plan
    has training), how many hosts and which ranks it holds."""
    from planning.memory_plan import format_bytes

    lean = host_peaks(plan["per_rank_peak"], ranks_per_host)
    ranks = len(plan["per_rank_peak"])
    step = ranks_per_host or ranks
    largest = max(range(len(lean)), key=lean.__getitem__)
    first, last = largest * step, min(ranks, (largest + 1) * step) - 1
    held = f"rank {first}" if first == last else f"ranks {first}-{last}"
    where = (f"{len(lean)} host(s) of {step} rank(s)" if ranks_per_host else
             f"all {ranks} rank(s) on one host")
    line = f"per host ({where}): largest host {largest} ({held}) needs {format_bytes(lean[largest])}"
    if "per_rank_peak_retained" in plan and plan["phases"].keys() & {"train", "eval"}:
        kept = host_peaks(plan["per_rank_peak_retained"], ranks_per_host)
        line += f", {format_bytes(kept[largest])} with freed memory kept for reuse"
    return line
