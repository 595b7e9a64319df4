"""Named recipes that reproduce published results with each paper's own setting.

A recipe fixes everything the paper fixed (architecture, widths, heads, dropout placement,
optimiser, learning rate, weight decay, epochs or steps, early-stopping rule, split, metric and
how a run's number is chosen) and runs the paper's number of runs on 1 process or under
``mpirun`` (METIS parts, one per rank). Run them with ``python -m gnnscale.recipes NAME``
(``--list`` shows them) or :func:`run_recipe`.

Recipes (``RECIPES``): ``gcn-kipf-{cora,citeseer}`` (:mod:`.kipf_gcn`),
``gat-velickovic-{cora,citeseer}`` (:mod:`.velickovic_gat`; ``gat-velickovic-code-*`` add the
two dropouts of the paper's reference code) and ``platonov-{gcn,sage,gat}-{tolokers,minesweeper}`` (:mod:`.platonov_residual`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import Callable

from ..comm import Communicator
from ..data import load_dataset
from ..errors import UsageError
from . import kipf_gcn, platonov_residual, velickovic_gat
from .common import local_problem, node_parts, row_normalise, score_summary


@dataclass(frozen=True)
class Recipe:
    """A paper's setting on one dataset.

    ``train_run(problem, comm, seed, max_epochs=...)`` trains one run and returns
    ``{"score", "epochs", "val_score"}``; run ``i`` uses seed ``i`` and data split
    ``i % num_splits``. ``published`` is ``(mean, std or None)`` in percent.
    """

    name: str
    paper: str
    dataset: str
    metric: str
    runs: int
    published: tuple
    train_run: Callable
    normalise_features: bool = False
    num_splits: int = 1
    overridable: tuple = ()  # train_run keywords a shortened run may change


KIPF = "Kipf & Welling, ICLR 2017"
VELICKOVIC = "Velickovic et al., ICLR 2018"
PLATONOV = "Platonov et al., ICLR 2023"
# Platonov et al.'s table (their notebooks/results.ipynb): test ROC AUC mean and std, percent
PLATONOV_TABLE = {("gcn", "tolokers"): (83.64, 0.67), ("gcn", "minesweeper"): (89.75, 0.52),
                  ("sage", "tolokers"): (82.43, 0.44), ("sage", "minesweeper"): (93.51, 0.57),
                  ("gat", "tolokers"): (83.70, 0.47), ("gat", "minesweeper"): (92.01, 0.68)}


def _recipes() -> dict:
    recipes = [
        Recipe("gcn-kipf-cora", KIPF, "cora", "acc", 100, (81.5, None), kipf_gcn.train_run,
               normalise_features=True),
        Recipe("gcn-kipf-citeseer", KIPF, "citeseer", "acc", 100, (70.3, None),
               kipf_gcn.train_run, normalise_features=True),
        Recipe("gat-velickovic-cora", VELICKOVIC, "cora", "acc", 100, (83.0, 0.7),
               velickovic_gat.train_run, normalise_features=True),
        Recipe("gat-velickovic-citeseer", VELICKOVIC, "citeseer", "acc", 100, (72.5, 0.7),
               velickovic_gat.train_run, normalise_features=True),
    ]
    for dataset, published in (("cora", (83.0, 0.7)), ("citeseer", (72.5, 0.7))):
        # the paper's setting plus the two dropouts its code adds (see velickovic_gat)
        recipes.append(Recipe(f"gat-velickovic-code-{dataset}", VELICKOVIC, dataset, "acc", 100,
                              published, partial(velickovic_gat.train_run, as_in_code=True),
                              normalise_features=True))
    for (block, dataset), published in PLATONOV_TABLE.items():
        recipes.append(Recipe(f"platonov-{block}-{dataset}", PLATONOV, dataset, "auc", 10,
                              published, partial(platonov_residual.train_run, block),
                              num_splits=10, overridable=("hidden", "layers")))
    return {recipe.name: recipe for recipe in recipes}


RECIPES = _recipes()


def get_recipe(name: str) -> Recipe:
    """The recipe called ``name``; :class:`UsageError` naming the known ones otherwise."""
    if name not in RECIPES:
        raise UsageError(f"unknown recipe {name!r}; choose one of {', '.join(RECIPES)}")
    return RECIPES[name]


def load_split(recipe: Recipe, split: int, data_root=None):
    """The recipe's dataset with data split ``split`` (features row-normalised if it asks)."""
    data = load_dataset(recipe.dataset, root=data_root, split=split)
    if recipe.normalise_features:
        data.x = row_normalise(data.x)
    return data


def run_recipe(name: str, comm: Communicator, *, runs: int | None = None,
               max_epochs: int | None = None, data_root=None, first_run: int = 0,
               on_run: Callable[[dict], None] | None = None, **overrides) -> dict:
    """Run recipe ``name`` (collective: every rank calls it with the same arguments).

    Args:
        runs: number of runs (default: the paper's).
        max_epochs: cap on epochs/steps per run (default: the paper's; a shortened run for
            tests, and then not the paper's setting).
        data_root: where the datasets are (see :func:`gnnscale.data.load_dataset`).
        first_run: index of the first run (seed and split), to continue a partial sweep.
        on_run: called with each run's record as it finishes.
        overrides: extra keyword arguments for the recipe's ``train_run`` (e.g. ``hidden`` or
            ``layers`` for a shortened Platonov run).

    Returns ``{"recipe", "paper", "dataset", "metric", "ranks", "published", "runs": [...],
    "summary": {"runs", "mean", "std"}}`` with scores in [0, 1] per run and percent in the
    summary; identical on every rank.
    """
    recipe = get_recipe(name)
    count = recipe.runs if runs is None else runs
    if count < 1:
        raise UsageError(f"runs must be at least 1, got {count}")
    if max_epochs is not None and max_epochs < 1:
        raise UsageError(f"max_epochs must be at least 1, got {max_epochs}")
    unknown = sorted(set(overrides) - set(recipe.overridable))
    if unknown:
        raise UsageError(f"recipe {name} cannot change {', '.join(unknown)}; it can change "
                         f"{', '.join(recipe.overridable) or 'nothing but runs and max_epochs'}")
    for key, value in overrides.items():
        if not (isinstance(value, int) and value >= 1):
            raise UsageError(f"{key} must be a positive integer, got {value!r}")
    limits = {} if max_epochs is None else {"max_epochs": max_epochs}
    parts, problems, records = None, {}, []
    for run in range(first_run, first_run + count):
        split = run % recipe.num_splits
        if split not in problems:
            data = load_split(recipe, split, data_root)
            parts = node_parts(data, comm) if parts is None else parts
            problems = {split: local_problem(data, parts, comm)}  # one split held at a time
        start = time.perf_counter()
        result = recipe.train_run(problems[split], comm, run, **limits, **overrides)
        record = {"run": run, "split": split, **result,
                  "time_s": time.perf_counter() - start}
        records.append(record)
        if on_run is not None:
            on_run(record)
    return {"recipe": recipe.name, "paper": recipe.paper, "dataset": recipe.dataset,
            "metric": recipe.metric, "ranks": comm.size,
            "published": {"mean": recipe.published[0], "std": recipe.published[1]},
            "max_epochs": max_epochs, "overrides": overrides, "runs": records,
            "summary": score_summary([r["score"] for r in records])}


__all__ = ["Recipe", "RECIPES", "PLATONOV_TABLE", "get_recipe", "load_split", "run_recipe"]
