"""``gnnscale tune``: sweep partitioners x part counts, predict step time and memory on a target
cluster, recommend one and say why."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import formatter, say
from .progress import progress_bar
from .arguments import add_dataset_arguments, add_model_arguments, load_graph, positive_int
from .arguments import simulated_network as _simulated_network

DEFAULT_METHODS = "random,metis,ldg,fennel,libra"
DEFAULT_PARTS = "2,4,8,16,32,64,128,256"


def _csv(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
    return items


def _int_list(text: str) -> list[int]:
    return [positive_int(t) for t in _csv(text)]


def add_parser(subparsers) -> None:
    """Register ``tune`` with every option and its default."""
    from partitioning import PARTITIONERS

    p = subparsers.add_parser(
        "tune", help="sweep partitioners x part counts and recommend one",
        description="Partition the dataset with every method for every part count, report "
                    "edge cut, replication, halo bytes, balance and partition time, predict the "
                    "training step and evaluation time on a target cluster "
                    "(planning.cost_model) and the peak memory per rank "
                    "(planning.memory_plan), and recommend the fastest, saying why. "
                    "Writes JSON and a PNG plot.",
        formatter_class=formatter)
    add_dataset_arguments(p)
    sweep = p.add_argument_group("sweep")
    sweep.add_argument("--methods", type=_csv, default=DEFAULT_METHODS,
                       help="comma-separated partitioners from "
                            f"{', '.join(sorted(PARTITIONERS))}")
    sweep.add_argument("--parts", type=_int_list, default=None,
                       help=f"comma-separated part counts, at most the number of nodes; None "
                            f"means {DEFAULT_PARTS} up to the number of nodes")
    sweep.add_argument("--seed", type=int, default=0, help="partitioner seed")
    add_model_arguments(p, planning=True)
    target = p.add_argument_group("target cluster")
    target.add_argument("--network", type=_simulated_network, default=None,
                        metavar="LATENCY_US,GBIT_PER_S",
                        help="network between hosts (same syntax as train --simulate-network, "
                             "e.g. 2,100 for 100 Gb/s InfiniBand, 50,10 for 10 Gb/s Ethernet); "
                             "None: every rank on this host, shared memory only")
    target.add_argument("--ranks-per-host", type=positive_int, default=None,
                        help="ranks sharing a host and its network link; default 1 with "
                             "--network, else every rank on one host")
    target.add_argument("--cores-per-rank", type=positive_int, default=None,
                        help="compute threads per rank; default 1 with --network, else this "
                             "host's cores / ranks")
    target.add_argument("--cores", type=positive_int, default=None,
                        help="a job of this many cores: choose the ranks per host and threads "
                             "per rank among --placements, each partitioned into its own rank "
                             "count (instead of --parts, --ranks-per-host, --cores-per-rank)")
    target.add_argument("--host-cores", type=positive_int, default=None,
                        help="cores of a target host, with --cores; None: this host's")
    target.add_argument("--sockets", type=positive_int, default=2,
                        help="sockets of a target host, with --cores")
    target.add_argument("--placements", type=_csv, default="host,socket,core",
                        help="with --cores: one rank per host, per socket, per core")
    halo = p.add_argument_group("halo exchange (choices of the model)")
    halo.add_argument("--halo-dtypes", type=_csv, default="float32",
                      help="comma-separated halo dtypes to predict, from float32, bfloat16, "
                           "int8, int4, int2 (train --halo-dtype)")
    halo.add_argument("--staleness", type=_csv, default="exact", metavar="POLICIES",
                      help="comma-separated staleness policies to predict: exact, pipelined"
                           "[:GAMMA], delayed:R, local (train --staleness); among the "
                           "configurations within 10%% of the fastest the most exact is "
                           "recommended")
    model = p.add_argument_group("cost model")
    model.add_argument("--cost-model", default=None, metavar="FILE",
                       help="JSON constants written by --calibrate (or a tune JSON); None "
                            "means the built-in constants")
    model.add_argument("--calibrate", action="store_true",
                       help="measure the constants on this host (aggregation, GEMM, "
                            "elementwise, gather per thread count; shared-memory alltoallv "
                            "with a 2-rank mpirun) and write PREFIX-cost-model.json")
    out = p.add_argument_group("output")
    out.add_argument("--out", default="tune", metavar="PREFIX",
                     help="write PREFIX.json and PREFIX.png (folders are created)")
    out.add_argument("--no-plot", action="store_true", help="skip the PNG")
    out.add_argument("--no-progress", action="store_true",
                     help="no progress bar (there is one only when stderr is a terminal)")
    p.set_defaults(func=run, outputs=outputs,
                   compiled_modules=lambda args: ("torch",) if args.calibrate else ())


def output_path(args, suffix: str) -> Path:
    """``--out PREFIX`` with ``suffix``: ``.json``, ``.png`` or ``-cost-model.json``."""
    prefix = Path(args.out)
    return prefix.with_name(prefix.name + suffix)


def outputs(args) -> list[tuple]:
    """What ``tune`` writes, as :func:`gnnscale.cli.outputs.check_outputs` takes it."""
    suffixes = [".json"] + [".png"] * (not args.no_plot) + ["-cost-model.json"] * args.calibrate
    return [(output_path(args, suffix), "--out", "file") for suffix in suffixes]


def model_spec(args, data):
    """The :class:`ModelSpec` that ``gnnscale train`` with the same options would build."""
    from .memory_check import model_options, model_spec_of

    return model_spec_of(model_options(args), data.num_features, data.num_classes)


def target_cluster(args, parts: int | None = None):
    """The :class:`Cluster` the options describe (see the option help for the defaults)."""
    import os

    from planning.cost_model import Cluster, Network

    if args.network is not None:
        return Cluster(ranks_per_host=args.ranks_per_host or 1,
                       cores_per_rank=args.cores_per_rank or 1, network=Network(*args.network))
    cores = os.cpu_count() or 1
    per_rank = args.cores_per_rank or max(1, cores // max(1, parts or 1))
    return Cluster(ranks_per_host=args.ranks_per_host, cores_per_rank=per_rank,
                   host_cores=cores)


def cost_model_from_args(args):
    """``--cost-model FILE`` or the built-in constants (bad files: UsageError, one line)."""
    from planning.cost_model import CostModel

    return CostModel.load(args.cost_model) if args.cost_model else CostModel()


def halo_options(args) -> list:
    """Every (halo dtype, staleness) pair the options list, as :class:`HaloOptions`."""
    from planning.halo_wire import HaloOptions

    return [HaloOptions(dtype, policy) for dtype in args.halo_dtypes for policy in args.staleness]


def job_placements(args, num_nodes: int | None = None) -> list:
    """``--cores``' placements (:func:`planning.placement.placements`); combinations the
    planner cannot model: UsageError, one line."""
    import os

    from planning.placement import placements

    from ..errors import UsageError

    given = [name for name, value in (("--parts", args.parts),
                                      ("--ranks-per-host", args.ranks_per_host),
                                      ("--cores-per-rank", args.cores_per_rank))
             if value is not None]
    if given:
        raise UsageError(f"--cores chooses the ranks and threads: leave out {given[0]}")
    host_cores = args.host_cores or os.cpu_count() or 1
    if args.cores > host_cores and args.network is None:
        raise UsageError(f"--cores {args.cores} spans hosts of {host_cores} cores: give the "
                         f"--network between them")
    out = placements(args.cores, host_cores, args.sockets, args.placements)
    too_many = [p for p in out if num_nodes is not None and p.ranks > num_nodes]
    if too_many:
        raise UsageError(f"--cores {args.cores}: {too_many[0].label} needs "
                         f"{too_many[0].ranks} parts, more than the {num_nodes} nodes")
    return out


def run(args) -> int:
    """Sweep, print the table and the recommendation, write JSON and PNG."""
    from partitioning import make_partitioner
    from planning.tune import (choose, explain, explain_choice, format_sweep_table,
                               plot_sweep, predicted, recommend, runners_up, score,
                               setting_label, write_json)
    from planning.workload import part_workload

    from ..errors import UsageError

    for method in args.methods:  # unknown names fail before loading anything
        make_partitioner(method, num_parts=1)
    halos = halo_options(args)  # unknown dtypes and policies too
    if args.cores is not None:
        job_placements(args)
    cost_model = cost_model_from_args(args)
    data = load_graph(args)
    say(f"gnnscale tune: {data.summary()}")
    places = job_placements(args, data.num_nodes) if args.cores is not None else None
    if places is not None:
        args.parts = [p.ranks for p in places]
    elif args.parts is None:
        args.parts = [p for p in _int_list(DEFAULT_PARTS) if p <= data.num_nodes] or [1]
    too_many = [p for p in args.parts if p > data.num_nodes]
    if too_many:
        raise UsageError(f"--parts {too_many[0]} exceeds the {data.num_nodes} nodes of "
                         f"{data.name}")
    if args.calibrate:
        from .calibrate import calibrate

        cost_model = calibrate(say=say)
        calibration = output_path(args, "-cost-model.json")
        calibration.absolute().parent.mkdir(parents=True, exist_ok=True)
        cost_model.save(calibration)
        say(f"wrote {calibration} (reuse with --cost-model)")
    spec = model_spec(args, data)
    memory = memory_factory(args, data, spec)
    total = len(args.methods) * len(args.parts)
    bar = progress_bar(total, "tune", "run", args.no_progress)
    rows = []
    try:
        for method in args.methods:
            for i, parts in enumerate(args.parts):
                partition = make_partitioner(method, num_parts=parts, seed=args.seed).fit(data)
                work = part_workload(data, partition)
                place = places[i] if places is not None else None
                cluster = place.cluster(network_of(args)) if place is not None \
                    else target_cluster(args, parts)
                first = score(data, partition, spec, cluster, cost_model,
                              memory(method, parts), halos[0], work)
                if place is not None:
                    first.update(placement=place.name, placement_label=place.label,
                                 ranks_per_host=place.ranks_per_host,
                                 threads_per_rank=place.threads_per_rank)
                rows.append(first)
                rows.extend({**first, **predicted(work, spec, cluster, cost_model, halo)}
                            for halo in halos[1:])
                bar.set_postfix_str(f"{method} x {parts}")
                bar.update(1)
    finally:
        bar.close()
    say(format_sweep_table(rows))
    say(describe_cluster(args))
    best = choose(rows)
    say(f"recommended: {best['method']} with {best['parts']} parts"
        + (f", {best['placement_label']}" if places is not None else "")
        + (f", --halo-dtype {best['halo_dtype']} --staleness {best['staleness']}"
           if len(halos) > 1 else "")
        + f": predicted {best['predicted_step_s'] * 1e3:.2f} ms per training step + "
        f"{best['predicted_eval_s'] * 1e3:.2f} ms per evaluation; {explain(best)}")
    detailed = places is not None or len(halos) > 1
    if detailed:
        say(f"why: {explain_choice(best, rows)}")
    close = runners_up(rows, best)
    if close:
        shown = [f"{setting_label(r) if detailed else r['method'] + ' x ' + str(r['parts'])} "
                 f"({r['predicted_epoch_s'] * 1e3:.2f} ms)" for r in close[:8]]
        more = f" and {len(close) - 8} more" if len(close) > 8 else ""
        say("within 10%: " + ", ".join(shown) + more)
    for p in args.parts:
        r = recommend(rows, p)
        say(f"  best at {p:>4} parts: {r['method']:<8} {r['predicted_epoch_s'] * 1e3:9.2f} ms "
            f"({r['bound']}-bound)")
    json_path = output_path(args, ".json")
    json_path.absolute().parent.mkdir(parents=True, exist_ok=True)
    write_json(json_path, rows, cost_model,
               extra={"dataset": data.name, "model": spec.__dict__,
                      "cluster": describe_cluster(args), "seed": args.seed})
    say(f"wrote {json_path}")
    if not args.no_plot:
        png_path = output_path(args, ".png")
        groups = {}
        for r in rows:  # one point per partition: its chosen halo setting
            groups.setdefault((r["method"], r["parts"]), []).append(r)
        plot_sweep([choose(group) for group in groups.values()], png_path)
        say(f"wrote {png_path}")
    return 0


def network_of(args):
    """``--network`` as a :class:`planning.cost_model.Network` (None: one host)."""
    from planning.cost_model import Network

    return Network(*args.network) if args.network is not None else None


def describe_cluster(args) -> str:
    """The assumptions behind the prediction, in one line."""
    if args.cores is not None:
        network = "" if args.network is None else \
            f", network {args.network[0] * 1e6:g} us, {args.network[1] * 8 / 1e9:g} Gb/s"
        cores = args.host_cores or "this host's"
        return (f"assumed: a job of {args.cores} cores on hosts of {cores} cores "
                f"({args.sockets} sockets){network}; placements {', '.join(args.placements)}")
    if args.network is None:
        return ("assumed: every rank on this host (shared memory), "
                f"{args.cores_per_rank or 'cores / ranks'} core(s) per rank")
    latency, bandwidth = args.network
    return (f"assumed: {args.ranks_per_host or 1} rank(s) per host, "
            f"{args.cores_per_rank or 1} core(s) per rank, network {latency * 1e6:g} us, "
            f"{bandwidth * 8 / 1e9:g} Gb/s between hosts")


def memory_factory(args, data, spec):
    """``(method, parts) -> (workload -> memory plan)`` for the sweep's memory column."""
    from planning.memory_plan import DatasetShape, plan_memory

    shape = DatasetShape.of(data)
    return lambda method, parts: (lambda work: plan_memory(
        shape, spec, work, partition_method=method))
