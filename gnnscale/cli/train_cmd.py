"""``gnnscale train``: full-batch training of a GNN, on one process or under ``mpirun``."""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

from ..errors import UsageError
from .arguments import add_dataset_arguments, load_graph, positive_int
from .common import agreed_failure, formatter, say
from .env_check import check_same_versions
from .report import format_header, format_profile_table, format_time_table

def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def _staleness(text: str) -> str:
    from ..graph.staleness import make_policy

    try:
        make_policy(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _dropout(text: str) -> float:
    value = _non_negative_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value


def _simulated_network(text: str) -> tuple[float, float]:
    """``LATENCY_US,GBIT_PER_S`` -> (latency in s, bandwidth in bytes/s)."""
    parts = text.split(",")
    try:
        latency_us, gbits = (float(p) for p in parts) if len(parts) == 2 else (None, None)
    except ValueError:
        latency_us = gbits = None
    if latency_us is None or not latency_us >= 0 or not gbits > 0 \
            or float("inf") in (latency_us, gbits):
        raise argparse.ArgumentTypeError(
            f"expected LATENCY_US,GBIT_PER_S with latency >= 0 and bandwidth > 0 (e.g. 50,10), "
            f"got {text!r}")
    return latency_us * 1e-6, gbits * 1e9 / 8


def add_parser(subparsers) -> None:
    """Register ``train`` with every option and its default."""
    from partitioning import PARTITIONERS

    from ..comm import BACKENDS
    from ..nn import MODEL_NAMES

    p = subparsers.add_parser(
        "train", help="train a GNN full-batch (run under mpirun for several ranks)",
        description="Full-batch GNN training. `gnnscale train` runs one process; "
                    "`mpirun -n K gnnscale train ...` splits the graph over K ranks.",
        formatter_class=formatter)
    add_dataset_arguments(p)
    model = p.add_argument_group("model")
    model.add_argument("--model", default="gcn", choices=MODEL_NAMES, help="layer type")
    model.add_argument("--layers", type=positive_int, default=2, help="number of graph layers")
    model.add_argument("--hidden", type=positive_int, default=16, help="hidden width")
    model.add_argument("--dropout", type=_dropout, default=0.5, help="dropout probability")
    model.add_argument("--heads", type=positive_int, default=8,
                       help="attention heads of hidden gat/gatv2 layers")
    model.add_argument("--out-heads", type=positive_int, default=1,
                       help="attention heads of the last gat/gatv2 layer (averaged)")
    model.add_argument("--attn-dropout", type=_dropout, default=0.0,
                       help="dropout on attention coefficients (gat/gatv2)")
    model.add_argument("--residual", action="store_true", help="skip connections")
    model.add_argument("--norm", default=None, choices=("batch", "layer", "layer-graph"),
                       help="normalisation after hidden layers (statistics over the whole graph)")
    model.add_argument("--activation", default="relu", choices=("relu", "elu", "gelu"),
                       help="activation after hidden layers")
    model.add_argument("--train-eps", action="store_true", help="learn GIN's epsilon")
    optim = p.add_argument_group("optimisation")
    optim.add_argument("--lr", type=_non_negative_float, default=0.01, help="Adam learning rate")
    optim.add_argument("--weight-decay", type=_non_negative_float, default=5e-4,
                       help="Adam weight decay")
    optim.add_argument("--epochs", type=positive_int, default=200, help="training epochs")
    optim.add_argument("--seed", type=int, default=0,
                       help="seed for weights, partitioning and (with the rank) dropout")
    dist = p.add_argument_group("distribution")
    dist.add_argument("--partitioner", default="metis", choices=sorted(PARTITIONERS),
                      help="how to split the graph over the ranks")
    dist.add_argument("--balance", default=None, metavar="TARGETS",
                      help="metis, kaminpar: comma-separated balance targets from nodes, "
                           "edges, train; None means the partitioner's own (nodes). On "
                           "power-law graphs use nodes,edges: node balance alone can give one "
                           "part most edges")
    dist.add_argument("--partitions", default=None, metavar="DIR",
                      help="train from a partition store written by `gnnscale partition` "
                           "(each rank reads only its part; --dataset is then ignored)")
    dist.add_argument("--backend", default="auto", choices=BACKENDS,
                      help="communication backend")
    dist.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                      help="where each rank computes (cuda: rank i uses GPU i mod GPUs on its "
                           "host; across ranks use --backend torch, whose NCCL moves GPU "
                           "tensors)")
    dist.add_argument("--halo-dtype", default="float32", choices=("float32", "bfloat16"),
                      help="dtype of halo rows and halo gradients on the wire (bfloat16 halves "
                           "the bytes; results are then no longer bit-exact)")
    dist.add_argument("--compute-dtype", default="float32", choices=("float32", "bfloat16"),
                      help="bfloat16: dense transforms under autocast (float32 accumulation, "
                           "loss, weights and optimiser state)")
    dist.add_argument("--staleness", default="exact", type=_staleness, metavar="POLICY",
                      help="when halos are fetched in training: exact, pipelined[:GAMMA] "
                           "(PipeGCN, one epoch stale, optional smoothing), delayed:R "
                           "(DistGNN cd-R), local (DistGNN 0c); evaluation is always exact")
    dist.add_argument("--no-overlap", action="store_true",
                      help="wait for each halo exchange before computing (for measuring)")
    dist.add_argument("--simulate-network", type=_simulated_network, default=None,
                      metavar="LATENCY_US,GBIT_PER_S",
                      help="SIMULATION for measuring: every halo exchange completes no earlier "
                           "than latency + bytes / bandwidth after it was posted (e.g. 50,10 "
                           "for 10 Gb/s Ethernet); the real exchange still runs underneath")
    dist.add_argument("--threads", type=positive_int, default=None,
                      help="torch threads per rank; default: cores / ranks on this host")
    run_opts = p.add_argument_group("evaluation and checkpoints")
    run_opts.add_argument("--metric", default="acc", choices=("acc", "f1", "auc"),
                          help="metric that picks the best epoch and drives early stopping "
                               "(f1: macro-F1; auc: ROC AUC, binary tasks); accuracy is "
                               "always reported")
    run_opts.add_argument("--early-stop", type=positive_int, default=None, metavar="PATIENCE",
                          help="stop when the validation metric has not improved for "
                               "PATIENCE epochs")
    run_opts.add_argument("--checkpoint-dir", default=None, metavar="DIR",
                          help="write DIR/latest.pt (model, optimiser, epoch, every rank's "
                               "random state) atomically")
    run_opts.add_argument("--checkpoint-every", type=positive_int, default=10, metavar="N",
                          help="epochs between checkpoints (with --checkpoint-dir)")
    run_opts.add_argument("--resume", action="store_true",
                          help="continue from --checkpoint-dir's latest.pt if there is one "
                               "(same ranks; the losses continue exactly)")
    run_opts.add_argument("--predictions-out", default=None, metavar="PATH",
                          help="after training write every node's logits and prediction")
    run_opts.add_argument("--predictions-layout", default="gathered",
                          choices=("gathered", "per-part"),
                          help="one .npz gathered on rank 0, or a folder with one per rank")
    out = p.add_argument_group("output")
    out.add_argument("--metrics-out", default=None, metavar="FILE",
                     help="write JSON lines: one per epoch, then a summary line")
    out.add_argument("--log-every", type=positive_int, default=None,
                     help="print an epoch line every N epochs; default: about 10 lines")
    out.add_argument("--no-progress", action="store_true", help="no progress bar")
    out.add_argument("--profile", action="store_true",
                     help="measure per rank: compute, whole vs exposed halo exchange, overlap "
                          "fraction, bytes sent, peak memory; print a table, add to metrics")
    out.add_argument("--plot", default=None, metavar="PNG",
                     help="write loss/metric curves and the per-rank time breakdown")
    p.set_defaults(func=run)


def run(args) -> int:
    from .. import comm as comm_module
    from ..threads import default_threads
    from ..engine import MetricsWriter, Trainer, summarise, write_predictions
    from ..graph.staleness import make_policy
    from ..nn import GNN

    torch.set_num_threads(args.threads or default_threads())
    comm = comm_module.init(args.backend)
    with agreed_failure(comm):
        device = _device(args.device)
    with agreed_failure(comm):
        check_same_versions(comm)
    if args.partitions:
        with agreed_failure(comm):
            if args.balance is not None:
                raise UsageError(f"--balance does not apply to --partitions {args.partitions}: "
                                 f"the store is partitioned already (gnnscale partition "
                                 f"--balance)")
        problem, header = _problem_from_store(args, comm, device)
    else:
        problem, header = _problem_in_memory(args, comm, device)
    with agreed_failure(comm):
        if args.metric == "auc" and problem.num_classes != 2:
            raise UsageError(f"--metric auc is for binary tasks; this graph has "
                             f"{problem.num_classes} classes (use --metric acc or f1)")
    torch.manual_seed(args.seed)  # identical initial weights on every rank
    model = GNN(args.model, problem.num_features, args.hidden, problem.num_classes,
                num_layers=args.layers, dropout=args.dropout, heads=args.heads,
                out_heads=args.out_heads, attn_dropout=args.attn_dropout,
                residual=args.residual, norm=args.norm, activation=args.activation,
                train_eps=args.train_eps).to(device)
    problem.graph.halo_plan.configure(overlap=not args.no_overlap,
                                      message_dtype=getattr(torch, args.halo_dtype),
                                      simulate_network=args.simulate_network)
    problem.graph.staleness = make_policy(args.staleness)
    metrics = ("acc", args.metric)
    trainer = Trainer(model, problem, comm, lr=args.lr, weight_decay=args.weight_decay,
                      seed=args.seed, metrics=metrics,
                      compute_dtype=getattr(torch, args.compute_dtype))
    resumed_from = _maybe_resume(trainer, args, comm)
    say(header)
    if resumed_from:
        say(f"resumed from {args.checkpoint_dir} after epoch {resumed_from}")
    writer = MetricsWriter(args.metrics_out, comm, append=bool(resumed_from))
    records = _train_with_progress(trainer, args, comm, writer)
    if problem.graph.staleness is not None:
        problem.graph.staleness.close()  # complete exchanges still in flight (collective)
    if args.predictions_out:
        path = write_predictions(trainer, args.predictions_out, args.predictions_layout)
        say(f"predictions for every node written to {path if comm.rank == 0 else ''}"
            f"{args.predictions_out if args.predictions_layout == 'per-part' else ''}")
    if not records:
        say(f"nothing to do: the checkpoint is already at epoch {trainer.epoch} of {args.epochs}")
        writer.close()
        return 0
    final = summarise(records, monitor=f"val_{args.metric}")
    mine = {"rank": comm.rank, "owned": problem.graph.num_owned,
            "halo": problem.graph.num_halo, **final["mean_time_breakdown_s"],
            "halo_bytes_per_epoch": float(np.mean([r.halo_bytes_sent for r in records])),
            "peak_rss_mb": records[-1].peak_rss_mb}
    probes = [r.profile for r in records if r.profile]
    if probes:
        mine.update({k: float(np.mean([p[k] for p in probes])) for k in probes[0]})
    per_rank = comm.allgather_object(mine)
    final["per_rank"] = per_rank
    final["ranks"] = comm.size
    writer.write(final)
    writer.close()
    say(format_time_table(final))
    if args.profile:
        say(format_profile_table(per_rank))
    if args.plot and comm.rank == 0:
        from .plot_cmd import plot_records

        plot_records([r.to_json() for r in records] + [final], args.plot)
        say(f"plot written to {args.plot}")
    return 0


def _maybe_resume(trainer, args, comm) -> int:
    """Load --checkpoint-dir's latest checkpoint when --resume asks for it; 0 if none."""
    from pathlib import Path

    from ..engine import load_checkpoint

    if not args.resume:
        return 0
    if not args.checkpoint_dir:
        raise UsageError("--resume needs --checkpoint-dir (where the checkpoints are)")
    latest = Path(args.checkpoint_dir) / "latest.pt"
    exists = comm.allgather_object(latest.is_file())
    if not any(exists):
        return 0
    with agreed_failure(comm):
        epoch = load_checkpoint(trainer, latest)
    return epoch


def _device(name: str) -> torch.device:
    """The torch device of this rank (GPUs are shared round-robin by the ranks of a host)."""
    if name == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise UsageError("--device cuda, but torch sees no CUDA device on this host "
                         "(torch.cuda.is_available() is False); use --device cpu")
    from ..comm import detect_launch

    return torch.device("cuda", detect_launch().local_rank % torch.cuda.device_count())


def _problem_in_memory(args, comm, device):
    """Every rank maps the graph (see :mod:`.shared_graph`); rank 0 partitions it and broadcasts
    the assignment; each rank then reads only its own rows."""
    from partitioning import make_partitioner, part_summary

    from ..engine import LocalProblem
    from .partition_cmd import balance_params
    from .shared_graph import load_shared_graph

    data = load_shared_graph(args, comm)
    with agreed_failure(comm):
        if comm.size > data.num_nodes:
            raise UsageError(f"{comm.size} ranks but the graph has only {data.num_nodes} nodes; "
                             f"launch at most {data.num_nodes} ranks")
        params = balance_params(args.balance, args.partitioner, "--partitioner")
        partitioner = make_partitioner(args.partitioner, num_parts=comm.size, seed=args.seed,
                                       **params)
    partition = None
    with agreed_failure(comm):
        if comm.rank == 0:
            partition = partitioner.fit(data)
    if partitioner.kind == "vertex_cut":  # DistGNN's vertex-cut execution
        from ..engine.vertex_cut_problem import broadcast_vertex_cut_problem

        problem = broadcast_vertex_cut_problem(data, partition, comm)
    else:
        parts = torch.from_numpy(partition.node_parts.astype(np.int64)) if comm.rank == 0 \
            else torch.empty(data.num_nodes, dtype=torch.int64)
        node_parts = comm.broadcast(parts, root=0).numpy()
        problem = LocalProblem.from_graph_data(data, node_parts, comm, device=device)
    header = ""
    if comm.rank == 0:
        summary = part_summary(data, partition) if comm.size > 1 else None
        header = format_header(data.summary(), args, comm.size, args.partitioner, summary)
    return problem, header


def _problem_from_store(args, comm, device):
    """Each rank reads only its own part of a partition store."""
    from ..engine.local_problem import LocalProblem, read_store_part

    with agreed_failure(comm):
        part = read_store_part(args.partitions, comm.rank, comm.size)
    problem = LocalProblem.from_store_part(part, comm, device=device)
    manifest = part.manifest
    graph, meta = manifest["graph"], manifest["partition"]
    name = (manifest.get("extra") or {}).get("dataset", args.partitions)
    description = (f"{name} from store {args.partitions}: {graph['num_nodes']:,} nodes, "
                   f"{graph['num_edges']:,} edges, {problem.num_features} features, "
                   f"{problem.num_classes} classes")
    summary = manifest.get("summary") if comm.size > 1 else None
    return problem, format_header(description, args, comm.size, meta["method"], summary)


def _train_with_progress(trainer, args, comm, writer):
    from tqdm import tqdm

    from ..engine import save_checkpoint

    log_every = args.log_every or max(1, args.epochs // 10)
    show = comm.rank == 0
    bar = tqdm(total=args.epochs, desc="training", unit="epoch", file=sys.stderr,
               disable=not show or args.no_progress, dynamic_ncols=True, leave=False)

    def on_epoch(record):
        writer.write(record.to_json())
        bar.update(1)
        bar.set_postfix(loss=f"{record.loss:.4f}", val=f"{record.val_acc:.3f}",
                        test=f"{record.test_acc:.3f}")
        if show and (record.epoch % log_every == 0 or record.epoch == 1):
            line = (f"epoch {record.epoch:4d}  loss {record.loss:.4f}  "
                    f"train {record.train_acc:.4f}  val {record.val_acc:.4f}  "
                    f"test {record.test_acc:.4f}  time {record.epoch_time_s * 1e3:.1f} ms")
            if args.metric != "acc":
                line += (f"  val_{args.metric} {record.metrics[f'val_{args.metric}']:.4f}  "
                         f"test_{args.metric} {record.metrics[f'test_{args.metric}']:.4f}")
            if bar.disable:
                print(line, flush=True)
            else:
                bar.write(line)

    probe_every = max(1, args.epochs // 5)

    def on_epoch_and_checkpoint(record):
        if args.profile and (record.epoch == 1 or record.epoch % probe_every == 0):
            record.profile = trainer.probe_overlap()
        on_epoch(record)
        if args.checkpoint_dir and (record.epoch % args.checkpoint_every == 0
                                    or record.epoch == args.epochs):
            save_checkpoint(trainer, args.checkpoint_dir)

    bar.update(trainer.epoch)
    try:
        return trainer.fit(args.epochs, on_epoch_and_checkpoint, patience=args.early_stop,
                           monitor=f"val_{args.metric}")
    finally:
        bar.close()
