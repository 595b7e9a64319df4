"""From parsed options to a ready :class:`~gnnscale.engine.Trainer`: the one path that
``gnnscale train`` and Python scripts (``examples/python_api.py``) share.

The options are those of :func:`gnnscale.cli.arguments.add_training_arguments`. Collective:
every rank calls :func:`build_trainer` with the same options.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..errors import UsageError
from .arguments import balance_params
from .common import agreed_failure
from .env_check import check_same_versions
from .report import format_header

if TYPE_CHECKING:  # torch loads in the functions that use it: options parse without it
    import torch


class BuiltTrainer(NamedTuple):
    """What :func:`build_trainer` returns."""

    trainer: object   # gnnscale.engine.Trainer
    header: str       # what is about to run (rank 0; empty elsewhere)
    metric: str       # the metric that picks the best epoch: acc, f1 or auc


def check_build_arguments(args) -> None:
    """Refuse option combinations that cannot work, before anything is loaded (UsageError)."""
    if getattr(args, "partitions", None) and args.balance is not None:
        raise UsageError(f"--balance does not apply to --partitions {args.partitions}: the "
                         f"store is partitioned already (gnnscale partition --balance)")
    balance_params(args.balance, args.partitioner, "--partitioner")
    if args.halo_dtype.startswith("int") and args.device == "cuda":
        raise UsageError(f"--halo-dtype {args.halo_dtype} is not supported on cuda yet "
                         f"(quantized halo rows are packed on the CPU); use float32 or bfloat16")


def default_metric(metric: str | None, num_classes: int) -> str:
    """The metric asked for, else ROC AUC for a binary task and accuracy otherwise."""
    if metric is None:
        return "auc" if num_classes == 2 else "acc"
    if metric == "auc" and num_classes != 2:
        raise UsageError(f"--metric auc is for binary tasks; this graph has {num_classes} "
                         f"classes (use --metric acc or f1)")
    return metric


def build_trainer(args, comm) -> BuiltTrainer:
    """Load (or read the store part of) this rank's problem, build the model and the trainer.

    ``args`` holds the options of :func:`~gnnscale.cli.arguments.add_training_arguments` and
    ``metric`` (None: :func:`default_metric`). User errors (bad data, more ranks than nodes)
    are raised on every rank alike (:class:`~gnnscale.errors.GnnscaleError`).
    """
    import torch

    from ..engine import Trainer
    from ..graph.staleness import make_policy
    from ..nn import GNN

    check_build_arguments(args)
    with agreed_failure(comm):
        device = _device(args.device)
    with agreed_failure(comm):
        check_same_versions(comm)
    if getattr(args, "partitions", None):
        problem, header = _problem_from_store(args, comm, device)
    else:
        problem, header = _problem_in_memory(args, comm, device)
    with agreed_failure(comm):
        metric = default_metric(getattr(args, "metric", None), problem.num_classes)
    torch.manual_seed(args.seed)  # identical initial weights on every rank
    model = GNN(args.model, problem.num_features, args.hidden, problem.num_classes,
                num_layers=args.layers, dropout=args.dropout, heads=args.heads,
                out_heads=args.out_heads, attn_dropout=args.attn_dropout,
                residual=args.residual, norm=args.norm, activation=args.activation,
                train_eps=args.train_eps).to(device)
    _configure_halo_plan(problem.graph.halo_plan, args)
    problem.graph.staleness = make_policy(args.staleness)
    trainer = Trainer(model, problem, comm, lr=args.lr, weight_decay=args.weight_decay,
                      seed=args.seed, metrics=("acc", metric),
                      compute_dtype=getattr(torch, args.compute_dtype))
    return BuiltTrainer(trainer, header, metric)


def _configure_halo_plan(plan, args) -> None:
    """Overlap, message dtype and the simulated network of ``--no-overlap``, ``--halo-dtype``
    and ``--simulate-network``; quantized rows are rounded from ``--seed``."""
    import torch

    from ..graph.quantize import WIRE_FORMATS

    wire = WIRE_FORMATS.get(args.halo_dtype) or getattr(torch, args.halo_dtype)
    plan.configure(overlap=not args.no_overlap, message_dtype=wire, quantize_seed=args.seed,
                   simulate_network=args.simulate_network)


def _device(name: str) -> torch.device:
    """The torch device of this rank (GPUs are shared round-robin by the ranks of a host)."""
    import torch

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
    import torch
    from partitioning import make_partitioner, part_summary

    from ..engine import LocalProblem
    from . import memory_check
    from .arguments import load_graph, resolve_data_root
    from .shared_graph import load_shared_graph

    data = load_shared_graph(comm, args.dataset, resolve_data_root(args),
                             lambda: load_graph(args))
    with agreed_failure(comm):
        if comm.size > data.num_nodes:
            raise UsageError(f"{comm.size} ranks but the graph has only {data.num_nodes} nodes; "
                             f"launch at most {data.num_nodes} ranks")
        params = balance_params(args.balance, args.partitioner, "--partitioner")
        partitioner = make_partitioner(args.partitioner, num_parts=comm.size, seed=args.seed,
                                       **params)
    with agreed_failure(comm):
        retain_fits = memory_check.check_training(
            comm, data, layout=memory_check.layout_of(args.dataset, args.data_root),
            model=memory_check.model_options(args), method=args.partitioner,
            ignore=getattr(args, "ignore_memory_plan", False))
    choose_allocator(retain_fits, comm)
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


def choose_allocator(retain_fits: bool, comm) -> None:
    """Keep glibc's defaults (freed memory returned, slower steps) when the memory plan says
    the heap the trainer would otherwise keep does not fit on this host; an explicit
    ``GNNSCALE_RETAIN_MEMORY`` decides instead."""
    import os

    from ..engine.memory import keep_allocator_defaults

    if retain_fits or "GNNSCALE_RETAIN_MEMORY" in os.environ:
        return
    keep_allocator_defaults()
    if comm.rank == 0:
        from .common import say

        say("memory: the run fits only if freed memory goes back to the system, so the "
            "allocator keeps its defaults (steps are slower; see `gnnscale plan`)")


def _problem_from_store(args, comm, device):
    """Each rank reads only its own part of a partition store."""
    from ..engine.store_problem import problem_from_store_part, read_store_part
    from . import memory_check

    with agreed_failure(comm):
        retain_fits = memory_check.check_store_training(
            comm, args.partitions, model=memory_check.model_options(args),
            ignore=getattr(args, "ignore_memory_plan", False))
    choose_allocator(retain_fits, comm)
    with agreed_failure(comm):
        part = read_store_part(args.partitions, comm.rank, comm.size)
    problem = problem_from_store_part(part, comm, device=device)
    manifest = part.manifest
    graph, meta = manifest["graph"], manifest["partition"]
    name = (manifest.get("extra") or {}).get("dataset", args.partitions)
    description = (f"{name} from store {args.partitions}: {graph['num_nodes']:,} nodes, "
                   f"{graph['num_edges']:,} edges, {problem.num_features} features, "
                   f"{problem.num_classes} classes")
    summary = manifest.get("summary") if comm.size > 1 else None
    return problem, format_header(description, args, comm.size, meta["method"], summary)
