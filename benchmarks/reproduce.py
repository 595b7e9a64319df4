"""Run recipes of ``gnnscale.recipes`` on 1 process or P ranks and merge the runs into
``benchmarks/results/reproduce_<recipe>.json`` (one entry per rank count, runs keyed by index,
so a sweep can be done in several shorter invocations), then print the comparison table.

Usage (from the repository root; run heavy sweeps under ``flock /tmp/gnnscale-bench.lock``):

    python benchmarks/reproduce.py RECIPE [RECIPE ...] --ranks 4 --runs 10 --first-run 0
    python benchmarks/reproduce.py --table        # the table of docs/reproductions.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
DATA_ROOT = Path(os.environ.get("GNNSCALE_DATA_ROOT") or REPO / "datasets")


def result_path(recipe: str) -> Path:
    return RESULTS / f"reproduce_{recipe.replace('-', '_')}.json"


def run_batch(recipes: list[str], ranks: int, runs: int, first_run: int,
              max_epochs: int | None) -> dict:
    """``python -m gnnscale.recipes`` (under ``mpirun -n ranks`` when ranks > 1)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        cmd = [sys.executable, "-m", "gnnscale.recipes", *recipes, "--runs", str(runs),
               "--first-run", str(first_run), "--data-root", str(DATA_ROOT), "--out", str(out),
               "--threads", "1"]
        if max_epochs is not None:
            cmd += ["--max-epochs", str(max_epochs)]
        env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", PYTHONUNBUFFERED="1",
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        if ranks > 1:
            mpirun = Path(sys.prefix) / "bin" / "mpirun"
            cmd = [str(mpirun), "-n", str(ranks), "--oversubscribe", *cmd]
        subprocess.run(cmd, check=True, cwd=REPO, env=env)
        return json.loads(out.read_text())


def merge(result: dict) -> Path:
    """Add ``result``'s runs to its recipe's file under ``"<ranks>_ranks"``; re-summarise."""
    path = result_path(result["recipe"])
    stored = json.loads(path.read_text()) if path.exists() else {}
    key = f"{result['ranks']}_ranks"
    entry = stored.get(key, {"runs": []})
    if entry.get("max_epochs") != result["max_epochs"] and entry["runs"]:
        raise SystemExit(f"{path} holds {key} runs with max_epochs={entry.get('max_epochs')}; "
                         f"this batch used {result['max_epochs']}")
    by_run = {r["run"]: r for r in entry["runs"]}
    by_run.update({r["run"]: r for r in result["runs"]})
    scores = np.array([by_run[i]["score"] for i in sorted(by_run)]) * 100
    entry = {"max_epochs": result["max_epochs"], "runs": [by_run[i] for i in sorted(by_run)],
             "summary": {"runs": int(scores.size), "mean": float(scores.mean()),
                         "std": float(scores.std(ddof=1)) if scores.size > 1 else None}}
    stored.update({k: result[k] for k in ("recipe", "paper", "dataset", "metric", "published")})
    stored["command"] = "python benchmarks/reproduce.py RECIPE --ranks P --runs N --first-run K"
    stored[key] = entry
    RESULTS.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(stored, indent=1) + "\n")
    os.replace(tmp, path)
    return path


def table() -> str:
    """Markdown table: published vs 1 process vs 4 ranks, for every recipe (from the result
    files; "not run" where a file has no runs for that rank count)."""
    from gnnscale.recipes import RECIPES

    rows = ["| recipe | metric | published | 1 process | 4 ranks (METIS) | 4 ranks - 1 process |",
            "|---|---|---|---|---|---|"]
    for name, recipe in RECIPES.items():
        path = result_path(name)
        stored = json.loads(path.read_text()) if path.exists() else {}
        mean, std = recipe.published
        shown = f"{mean:.2f}" + (f" ± {std:.2f}" if std is not None else "")
        one, four = (stored.get(k, {}).get("summary") for k in ("1_ranks", "4_ranks"))
        cells = ["not run" if not s else
                 f"{s['mean']:.2f} ± {s['std'] or float('nan'):.2f} (n={s['runs']})"
                 for s in (one, four)]
        diff = f"{four['mean'] - one['mean']:+.2f}" if one and four else "-"
        rows.append(f"| {name} | {recipe.metric} | {shown} | {cells[0]} | {cells[1]} | {diff} |")
    return "\n".join(rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("recipes", nargs="*")
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--first-run", type=int, default=0)
    p.add_argument("--max-epochs", type=int, default=None)
    p.add_argument("--table", action="store_true", help="print the table and exit")
    args = p.parse_args()
    if not args.table:
        results = run_batch(args.recipes, args.ranks, args.runs, args.first_run,
                            args.max_epochs)
        for result in results.values():
            print(f"merged into {merge(result)}")
    print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
