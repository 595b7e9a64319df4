"""The R-MAT workload the engine benchmarks share: its options and its graph.

``engine_vs_dgl.py``, ``sar_vs_gnnscale.py`` and ``engine_phases.py`` train on
``gnnscale.data.generate_rmat`` graphs given by the same five options (R-MAT 18 by default:
262,144 nodes, 16 generated edges per node, 128 features, 16 classes, seed 0).
:func:`add_rmat_arguments` adds them to a parser, :func:`rmat_graph` generates the graph they
name and :func:`rmat_argv` gives them back as command-line arguments (for a worker process).
:func:`training_step_s` is what the benchmarks that compare measured steps with predicted ones
count as a training step.
"""

from __future__ import annotations

import argparse

#: (option, default, help) of the workload; the option's dest is its name with ``_`` for ``-``
RMAT_OPTIONS = (
    ("scale", 18, "log2 of the R-MAT graph's nodes"),
    ("edge-factor", 16, "generated edges per node (before symmetrising)"),
    ("features", 128, "node feature width"),
    ("classes", 16, "number of classes"),
    ("seed", 0, "seed of the graph, the model's weights and the dropout"),
)


def add_rmat_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--scale``, ``--edge-factor``, ``--features``, ``--classes`` and ``--seed``
    (integers, defaults as :data:`RMAT_OPTIONS`) to ``parser``."""
    for option, default, text in RMAT_OPTIONS:
        parser.add_argument(f"--{option}", type=int, default=default,
                            help=f"{text} (default {default})")


def rmat_graph(args: argparse.Namespace):
    """The ``GraphData`` the options in ``args`` name."""
    from gnnscale.data import generate_rmat

    return generate_rmat(scale=args.scale, edge_factor=args.edge_factor, seed=args.seed,
                         num_features=args.features, num_classes=args.classes)


def rmat_argv(args: argparse.Namespace) -> list[str]:
    """The options in ``args`` as command-line arguments, e.g. ``["--scale", "18", ...]``."""
    argv = []
    for option, _, _ in RMAT_OPTIONS:
        argv += [f"--{option}", str(getattr(args, option.replace("-", "_")))]
    return argv



def training_step_s(times: dict) -> float:
    """A training step's seconds from an epoch record's ``time`` (the trainer's phases):
    forward, backward and the optimiser's step, as the time model predicts it; evaluation
    apart."""
    return times["forward_s"] + times["backward_s"] + times["optimizer_s"]
