"""``gnnscale tune``: sweep partitioners x part counts, predict epoch time, recommend one."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .common import formatter, say
from .arguments import add_dataset_arguments, load_graph, positive_int

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
                    "epoch time with the alpha-beta cost model (partitioning.cost_model) and "
                    "recommend the fastest. Writes JSON and a PNG plot.",
        formatter_class=formatter)
    add_dataset_arguments(p)
    sweep = p.add_argument_group("sweep")
    sweep.add_argument("--methods", type=_csv, default=DEFAULT_METHODS,
                       help="comma-separated partitioners from "
                            f"{', '.join(sorted(PARTITIONERS))}")
    sweep.add_argument("--parts", type=_int_list, default=DEFAULT_PARTS,
                       help="comma-separated part counts; counts above the number of nodes "
                            "are skipped")
    sweep.add_argument("--seed", type=int, default=0, help="partitioner seed")
    model = p.add_argument_group("cost model")
    model.add_argument("--layers", type=positive_int, default=2, help="number of GNN layers")
    model.add_argument("--hidden", type=positive_int, default=16, help="hidden width")
    model.add_argument("--cost-model", default=None, metavar="FILE",
                       help="JSON file of cost-model constants (as written under "
                            "'cost_model' in a tune JSON); None means the built-in constants")
    model.add_argument("--calibrate", action="store_true",
                       help="measure the compute constants on this machine (sparse aggregation "
                            "and dense transforms) and, under mpirun with several ranks, the "
                            "communicator's alpha and beta")
    out = p.add_argument_group("output")
    out.add_argument("--out", default="tune", metavar="PREFIX",
                     help="write PREFIX.json and PREFIX.png")
    out.add_argument("--no-plot", action="store_true", help="skip the PNG")
    out.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def model_dims(data, layers: int, hidden: int) -> list[int]:
    """Layer widths ``[features, hidden x (layers - 1), classes]`` for the cost model."""
    return [max(data.num_features, 1)] + [hidden] * (layers - 1) + [max(data.num_classes, 1)]


def run(args) -> int:
    """Sweep, print the table and the recommendation, write JSON and PNG."""
    from tqdm import tqdm

    from partitioning import make_partitioner
    from partitioning.cost_model import CostModel
    from partitioning.tune import format_sweep_table, plot_sweep, recommend, sweep, write_json

    from ..errors import UsageError

    prefix = Path(args.out)
    if not prefix.absolute().parent.is_dir():
        raise UsageError(f"--out {args.out}: folder {prefix.absolute().parent} does not exist")
    for method in args.methods:  # unknown names fail before loading anything
        make_partitioner(method, num_parts=1)
    cost_model = _load_cost_model(args.cost_model) if args.cost_model else CostModel()
    data = load_graph(args)
    say(f"gnnscale tune: {data.summary()}")
    if args.calibrate:
        cost_model = calibrate(cost_model)
        say(f"calibrated constants: {json.dumps(cost_model.to_dict())}")
    parts = [p for p in args.parts if p <= data.num_nodes]
    if len(parts) < len(args.parts):
        say(f"skipping part counts above {data.num_nodes} nodes: "
            f"{[p for p in args.parts if p > data.num_nodes]}")
    if not parts:
        raise UsageError(f"no part count in {args.parts} fits a graph of {data.num_nodes} nodes")
    dims = model_dims(data, args.layers, args.hidden)
    bar = tqdm(total=len(args.methods) * len(parts), desc="tune", unit="run", file=sys.stderr,
               disable=args.no_progress, leave=False, dynamic_ncols=True)

    def progress(done, total, label):
        bar.set_postfix_str(label)
        bar.update(1)

    try:
        rows = sweep(data, args.methods, parts, dims, seed=args.seed, cost_model=cost_model,
                     progress=progress)
    finally:
        bar.close()
    say(format_sweep_table(rows))
    best = recommend(rows)
    json_path = prefix.with_name(prefix.name + ".json")
    write_json(json_path, rows, cost_model,
               extra={"dataset": data.name, "dims": dims, "seed": args.seed})
    say(f"recommended: {best['method']} with {best['parts']} parts "
        f"(predicted {best['predicted_epoch_s'] * 1e3:.2f} ms/epoch; compute "
        f"{best['predicted_compute_s'] * 1e3:.2f}, halo {best['predicted_halo_s'] * 1e3:.2f}, "
        f"allreduce {best['predicted_allreduce_s'] * 1e3:.2f})")
    for p in parts:
        r = recommend(rows, p)
        say(f"  best at {p:>4} parts: {r['method']:<7} {r['predicted_epoch_s'] * 1e3:9.2f} ms")
    say(f"wrote {json_path}")
    if not args.no_plot:
        png_path = prefix.with_name(prefix.name + ".png")
        plot_sweep(rows, png_path)
        say(f"wrote {png_path}")
    return 0


def _load_cost_model(path):
    from partitioning.cost_model import CostModel

    from ..errors import UsageError

    try:
        values = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"--cost-model {path}: cannot read JSON ({exc})") from None
    return CostModel.from_dict(values.get("cost_model", values))


def _timed(fn, repeats: int = 3) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def calibrate(model):
    """Fit the model's constants from short measurements on this machine.

    Compute: a sparse aggregation (torch CSR x dense) and dense matmuls of several sizes fit
    ``gamma_edge`` and ``gamma_flop``. Communication: under a launcher with several ranks,
    allreduces of several sizes fit ``alpha`` and ``beta``; in a single process they keep their
    values (there is no network to measure).
    """
    import numpy as np
    import torch

    from partitioning.cost_model import CostModel

    from .. import comm as comm_module

    rng = np.random.default_rng(0)
    rows = []
    for n, deg, width in ((20000, 10, 32), (20000, 20, 64), (50000, 10, 128)):
        e = n * deg
        indptr = torch.arange(0, e + 1, deg, dtype=torch.int64)
        adj = torch.sparse_csr_tensor(indptr, torch.from_numpy(rng.integers(0, n, e)),
                                      torch.ones(e), size=(n, n))
        feats = torch.randn(n, width)
        rows.append({"agg_work": float(e * width), "seconds": _timed(lambda: adj @ feats)})
    for n, a, b in ((20000, 64, 64), (20000, 256, 128), (50000, 128, 16)):
        left, right = torch.randn(n, a), torch.randn(a, b)
        rows.append({"flops": 2.0 * n * a * b, "seconds": _timed(lambda: left @ right)})
    comm = comm_module.init("auto")
    if comm.size > 1:
        for values in (1, 1 << 10, 1 << 16, 1 << 20):
            buf = torch.ones(values)
            seconds = _timed(lambda: comm.allreduce(buf))
            seconds = comm.allreduce_scalar(seconds, op="max")
            p = comm.size
            rows.append({"messages": 2.0 * (p - 1),
                         "bytes": 2.0 * (p - 1) / p * values * 4, "seconds": seconds})
    fitted = CostModel.fit(rows, backward_factor=model.backward_factor,
                           bytes_per_value=model.bytes_per_value)
    if comm.size == 1:
        fitted.alpha, fitted.beta = model.alpha, model.beta
    return fitted
