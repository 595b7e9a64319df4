"""Argument types and option groups shared by the sub-commands and by Python scripts.

``train`` is assembled from the groups below (data, model, optimisation, distribution,
evaluation and checkpoints, output); a script that wants the same options (as
``examples/python_api.py`` does) adds the same groups to its own parser and hands the parsed
namespace to :func:`gnnscale.cli.build.build_trainer`.
"""

from __future__ import annotations

import argparse
import json
from contextlib import contextmanager

DEFAULT_CHECKPOINT_EVERY = 10


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def probability(text: str) -> float:
    """argparse type: a dropout probability in [0, 1)."""
    value = non_negative_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value


def staleness_policy(text: str) -> str:
    """argparse type: a staleness policy name that :func:`make_policy` accepts."""
    from ..graph.staleness import make_policy

    try:
        make_policy(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def simulated_network(text: str) -> tuple[float, float]:
    """argparse type: ``LATENCY_US,GBIT_PER_S`` -> (latency in s, bandwidth in bytes/s)."""
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


def balance_targets(text: str) -> tuple:
    """``--balance nodes,edges`` -> ``("nodes", "edges")`` (the ``balance`` parameter)."""
    return tuple(b.strip() for b in text.split(",") if b.strip())


def balance_methods() -> list[str]:
    """Registry names of the partitioners that take a ``balance`` parameter."""
    from partitioning import PARTITIONERS

    return sorted(name for name, cls in PARTITIONERS.items() if "balance" in cls.defaults)


def balance_params(balance, method: str, option: str) -> dict:
    """``{"balance": targets}`` for ``--balance`` (empty when not given); refuses a method
    without balance targets, naming ``option`` (``--method`` or ``--partitioner``)."""
    from ..errors import UsageError

    if balance is None:
        return {}
    if method not in balance_methods():
        raise UsageError(f"--balance applies to {option} {' or '.join(balance_methods())}, "
                         f"not {method!r}")
    return {"balance": balance_targets(balance)}


def add_dataset_arguments(parser, default_dataset: str = "sbm") -> None:
    """``--dataset``, ``--data-root``, ``--num-nodes``, ``--split``, ``--dataset-option``; the
    dataset is checked before the command runs (``inputs``: :func:`check_dataset`)."""
    parser.set_defaults(inputs=check_dataset)
    data = parser.add_argument_group("data")
    data.add_argument("--dataset", default=default_dataset,
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
                      help="size of a generated graph (sbm, rmat); default: the generator's own")
    data.add_argument("--split", type=int, default=0,
                      help="which split to use where a dataset ships several")
    data.add_argument("--dataset-option", type=key_value, action="append", default=None,
                      metavar="KEY=VALUE",
                      help="loader or generator option, repeatable (e.g. scale=18, "
                           "num_features=128, scheme=time for OGB)")


def add_model_arguments(parser, *, planning: bool = False) -> None:
    """The GNN: layer type, depth, width, dropout, attention heads, norms.

    ``planning``: only what the time and memory models read (``--model`` among the models they
    know, ``--layers``, ``--hidden``, ``--dropout``, ``--heads``, ``--out-heads``), for
    ``tune`` and ``plan``.
    """
    if planning:
        from planning.cost_model import MODELS as names
    else:
        from ..nn import MODEL_NAMES as names

    model = parser.add_argument_group("model")
    model.add_argument("--model", default="gcn", choices=names, help="layer type")
    model.add_argument("--layers", type=positive_int, default=2, help="number of graph layers")
    model.add_argument("--hidden", type=positive_int, default=16, help="hidden width")
    model.add_argument("--dropout", type=probability, default=0.5,
                       help="dropout probability")
    model.add_argument("--heads", type=positive_int, default=8,
                       help="attention heads of hidden gat/gatv2 layers")
    model.add_argument("--out-heads", type=positive_int, default=1,
                       help="attention heads of the last gat/gatv2 layer (averaged)")
    if planning:
        return
    model.add_argument("--attn-dropout", type=probability, default=0.0,
                       help="dropout on attention coefficients (gat/gatv2)")
    model.add_argument("--residual", action="store_true", help="skip connections")
    model.add_argument("--norm", default=None, choices=("batch", "layer", "layer-graph"),
                       help="normalisation after hidden layers (statistics over the whole "
                            "graph); default: none")
    model.add_argument("--activation", default="relu", choices=("relu", "elu", "gelu"),
                       help="activation after hidden layers")
    model.add_argument("--train-eps", action="store_true", help="learn GIN's epsilon")


def add_optimisation_arguments(parser, default_epochs: int = 200) -> None:
    """Adam's learning rate and weight decay, the number of epochs, the seed."""
    optim = parser.add_argument_group("optimisation")
    optim.add_argument("--lr", type=non_negative_float, default=0.01, help="Adam learning rate")
    optim.add_argument("--weight-decay", type=non_negative_float, default=5e-4,
                       help="Adam weight decay")
    optim.add_argument("--epochs", type=positive_int, default=default_epochs,
                       help="training epochs")
    optim.add_argument("--seed", type=int, default=0,
                       help="seed for weights, partitioning and (with the rank) dropout")


#: ``--halo-dtype`` choices: torch dtypes and the quantized formats of gnnscale.graph.quantize
HALO_DTYPES = ("float32", "bfloat16", "int8", "int4", "int2")


def add_distribution_arguments(parser) -> None:
    """How the graph is split over the ranks and how the ranks exchange halos."""
    from partitioning import PARTITIONERS

    from ..comm import BACKENDS

    dist = parser.add_argument_group("distribution")
    dist.add_argument("--partitioner", default="metis", choices=sorted(PARTITIONERS),
                      help="how to split the graph over the ranks")
    dist.add_argument("--balance", default=None, metavar="TARGETS",
                      help="metis, kaminpar: comma-separated balance targets from nodes, "
                           "edges, train; default: the partitioner's own (nodes). On "
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
    dist.add_argument("--halo-dtype", default="float32", choices=HALO_DTYPES,
                      help="dtype of halo rows and halo gradients on the wire (bfloat16 halves "
                           "the bytes; int8, int4, int2: that many bits per value plus a "
                           "float32 scale and offset per row, stochastically rounded, CPU "
                           "only; halo gradients travel at the same width; results are then "
                           "no longer bit-exact)")
    dist.add_argument("--compute-dtype", default="float32", choices=("float32", "bfloat16"),
                      help="bfloat16: dense transforms under autocast (float32 accumulation, "
                           "loss, weights and optimiser state)")
    # default None, not "exact": argparse would check a text default at every parse, and the
    # check loads torch (make_policy(None) is exact)
    dist.add_argument("--staleness", default=None, type=staleness_policy, metavar="POLICY",
                      help="when halos are fetched in training: exact, pipelined[:GAMMA] "
                           "(PipeGCN, one epoch stale, optional smoothing), delayed:R "
                           "(DistGNN cd-R), local (DistGNN 0c); evaluation is always exact "
                           "(default: exact)")
    dist.add_argument("--no-overlap", action="store_true",
                      help="wait for each halo exchange before computing (for measuring)")
    dist.add_argument("--simulate-network", type=simulated_network, default=None,
                      metavar="LATENCY_US,GBIT_PER_S",
                      help="SIMULATION for measuring: every halo exchange completes no earlier "
                           "than latency + bytes / bandwidth after it was posted (e.g. 50,10 "
                           "for 10 Gb/s Ethernet); the real exchange still runs underneath")
    dist.add_argument("--threads", type=positive_int, default=None,
                      help="threads per rank; default: OMP_NUM_THREADS where set, else cores / "
                           "ranks on this host")


def add_evaluation_arguments(parser) -> None:
    """The metric that picks the best epoch, early stopping, checkpoints, predictions."""
    run_opts = parser.add_argument_group("evaluation and checkpoints")
    run_opts.add_argument("--metric", default=None, choices=("acc", "f1", "auc"),
                          help="metric that picks the best epoch and drives early stopping "
                               "(f1: macro-F1; auc: ROC AUC, binary tasks only); default: auc "
                               "for binary tasks (where one class may dominate), acc "
                               "otherwise; accuracy is always reported")
    run_opts.add_argument("--early-stop", type=positive_int, default=None, metavar="PATIENCE",
                          help="stop when the validation metric has not improved for "
                               "PATIENCE epochs")
    run_opts.add_argument("--eval-every", type=positive_int, default=1, metavar="N",
                          help="evaluate after every N-th epoch and after the last (the others "
                               "log the training loss only; early stopping is checked at "
                               "evaluations); training is the same for any N")
    run_opts.add_argument("--checkpoint-dir", default=None, metavar="DIR",
                          help="write DIR/latest.pt (model, optimiser, epoch, every rank's "
                               "random state, the epoch records) atomically; DIR is created")
    run_opts.add_argument("--checkpoint-every", type=positive_int, default=None, metavar="N",
                          help=f"epochs between checkpoints (needs --checkpoint-dir); default: "
                               f"{DEFAULT_CHECKPOINT_EVERY}, and always after the last epoch")
    run_opts.add_argument("--resume", action="store_true",
                          help="continue from --checkpoint-dir's latest.pt (same ranks; losses, "
                               "metrics file and summary continue exactly); with no checkpoint "
                               "there yet, say so and start at epoch 1")
    run_opts.add_argument("--predictions-out", default=None, metavar="PATH",
                          help="after training write every node's logits and prediction")
    run_opts.add_argument("--predictions-layout", default="gathered",
                          choices=("gathered", "per-part"),
                          help="one .npz gathered on rank 0, or a folder with one per rank")


def add_output_arguments(parser) -> None:
    """Metrics file, console lines, progress bar, profiling, plot."""
    out = parser.add_argument_group("output")
    out.add_argument("--metrics-out", default=None, metavar="FILE",
                     help="write JSON lines: one per epoch, then a summary line")
    out.add_argument("--log-every", type=positive_int, default=None, metavar="N",
                     help="print an epoch line every N epochs; default: about 10 lines")
    out.add_argument("--no-progress", action="store_true",
                     help="no progress bar (there is one only when stderr is a terminal)")
    out.add_argument("--profile", action="store_true",
                     help="measure per rank: compute, whole vs exposed halo exchange, overlap "
                          "fraction, bytes sent, peak memory; print a table, add to metrics")
    out.add_argument("--plot", default=None, metavar="PNG",
                     help="write loss/metric curves and the per-rank time breakdown")


def add_training_arguments(parser, default_dataset: str = "sbm",
                           default_epochs: int = 200) -> None:
    """Every option of ``gnnscale train`` that :func:`build_trainer` reads."""
    add_dataset_arguments(parser, default_dataset)
    add_model_arguments(parser)
    add_optimisation_arguments(parser, default_epochs)
    add_distribution_arguments(parser)


def load_graph(args):
    """Load the dataset the shared data arguments name (downloading it with ``--download``)."""
    from ..data import load_dataset

    options = dict(args.dataset_option or [])
    if args.num_nodes:
        options["num_nodes"] = args.num_nodes
    with _in_command_line_words():
        return load_dataset(args.dataset, root=data_root_for(args), split=args.split, **options)


def check_dataset(args) -> None:
    """Refuse (:class:`~gnnscale.errors.DataError`, the message loading would give) an unknown
    dataset name, a known one missing from the data root, a path that does not exist or holds
    no dataset in a known layout, without loading anything: what :func:`load_graph` will load
    is found by the loaders' own rules (:func:`gnnscale.data.load.find_source`). Nothing to
    check with ``--partitions`` (the dataset is not read) or for a name ``--download`` fetches
    first. A sub-command's ``inputs``, run by :func:`gnnscale.cli.main.main` before it loads
    torch."""
    from ..data.load import find_source

    if getattr(args, "partitions", None):
        return
    root = resolve_data_root(args)
    if _to_download(args, root):
        return
    with _in_command_line_words():
        find_source(args.dataset, root)


@contextmanager
def _in_command_line_words():
    """A known dataset missing from the data root said in the command line's words (its
    options, not Python's arguments)."""
    from ..errors import DataError, DatasetNotFoundError

    try:
        yield
    except DatasetNotFoundError as exc:
        hint = exc.download or "pass --data-root DIR or set GNNSCALE_DATA_ROOT"
        raise DataError(f"{exc.where}; {hint}") from None


def data_root_for(args):
    """The data root to read ``args.dataset`` from (see :func:`resolve_data_root`); with
    ``--download``, a registered name missing from it is downloaded into it first."""
    from ..data.download import download_dataset

    root = resolve_data_root(args)
    if _to_download(args, root):
        download_dataset(str(args.dataset), root)
    return root


def _to_download(args, root) -> bool:
    """``--download`` of a registered name that is not under ``root`` yet."""
    from ..data.load import find_dataset
    from ..data.registry import registered

    return getattr(args, "download", False) and registered(str(args.dataset)) is not None \
        and find_dataset(str(args.dataset), root) is None


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
