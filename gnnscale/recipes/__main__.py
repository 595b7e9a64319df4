"""``python -m gnnscale.recipes NAME [NAME ...]``: run named recipes on 1 process or under
``mpirun`` and print (and with ``--out`` write) each run's score and the mean and deviation
against the published figure. ``--list`` shows the recipes."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..errors import GnnscaleError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gnnscale.recipes",
                                description="Reproduce published results with the papers' "
                                            "settings (under mpirun: one METIS part per rank).")
    p.add_argument("names", nargs="*", metavar="NAME", help="recipes to run (see --list)")
    p.add_argument("--list", action="store_true", help="list the recipes and exit")
    p.add_argument("--runs", type=int, default=None, help="runs per recipe (default: paper's)")
    p.add_argument("--first-run", type=int, default=0,
                   help="index of the first run (its seed and split)")
    p.add_argument("--max-epochs", type=int, default=None,
                   help="cap epochs/steps per run (shortened: no longer the paper's setting)")
    p.add_argument("--hidden", type=int, default=None,
                   help="Platonov recipes: hidden width (shortened: not the paper's 512)")
    p.add_argument("--layers", type=int, default=None,
                   help="Platonov recipes: residual blocks (shortened: not the paper's 5)")
    p.add_argument("--data-root", default=None,
                   help="dataset folder (default $GNNSCALE_DATA_ROOT, else ./data)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads per rank (default: OMP_NUM_THREADS where set, else cores / "
                        "ranks on this host)")
    p.add_argument("--out", default=None, metavar="JSON",
                   help="write {recipe: result} here (rank 0, atomically)")
    return p


def _write_atomically(path: str, payload: dict) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(payload, indent=1) + "\n")
    os.replace(tmp, target)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from . import RECIPES, get_recipe, run_recipe

    try:
        if args.list or not args.names:
            for name, recipe in RECIPES.items():
                mean, std = recipe.published
                shown = f"{mean}" + (f" +- {std}" if std is not None else "")
                print(f"{name:28s} {recipe.paper:28s} {recipe.metric:4s} published {shown}, "
                      f"{recipe.runs} runs")
            return 0
        overrides = {k: v for k, v in (("hidden", args.hidden), ("layers", args.layers))
                     if v is not None}
        for name in args.names:
            recipe = get_recipe(name)
            for key in overrides:
                if key not in recipe.overridable:
                    raise GnnscaleError(f"--{key} does not apply to recipe {name}")
        for value, option in ((args.runs, "--runs"), (args.max_epochs, "--max-epochs"),
                              (args.threads, "--threads"), (args.hidden, "--hidden"),
                              (args.layers, "--layers")):
            if value is not None and value < 1:
                raise GnnscaleError(f"{option} must be at least 1, got {value}")
        if args.first_run < 0:
            raise GnnscaleError(f"--first-run must be >= 0, got {args.first_run}")
    except GnnscaleError as exc:
        print(f"gnnscale.recipes: error: {exc}", file=sys.stderr)
        return 2

    import torch

    from .. import comm as comm_module
    from ..threads import default_threads

    torch.set_num_threads(args.threads or default_threads())
    comm = comm_module.init()
    results = {}
    for name in args.names:
        def report(record, name=name):
            if comm.rank == 0:
                print(f"{name} run {record['run']:3d} split {record['split']}: "
                      f"{record['score'] * 100:.2f} ({record['epochs']} epochs, "
                      f"{record['time_s']:.1f} s)", flush=True)

        result = run_recipe(name, comm, runs=args.runs, max_epochs=args.max_epochs,
                            data_root=args.data_root, first_run=args.first_run, on_run=report,
                            **overrides)
        results[name] = result
        if comm.rank == 0:
            s, pub = result["summary"], result["published"]
            shown = f"{pub['mean']}" + (f" +- {pub['std']}" if pub["std"] is not None else "")
            print(f"{name} on {comm.size} rank(s): {s['mean']:.2f} +- {s['std']:.2f} over "
                  f"{s['runs']} runs (published {shown})", flush=True)
    if args.out and comm.rank == 0:
        _write_atomically(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
