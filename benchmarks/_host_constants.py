"""Host constants pooled over a sweep's jobs, and which partitioner orders the measurements
resolve (for ``tune_validation.py``).

Every job of a ``--vcluster`` sweep measures its own constants just before training
(``calibrate_in_job``). On this shared host they scatter from job to job (the fixed cost per
exchange 0-0.7 ms, the aggregation's per-edge cost beyond the cache 4-20 ns), so the
partitioners of one group, each trained in a job of its own, would be predicted with
different constants, whereas ``gnnscale tune`` compares them with one calibration.
:func:`pooled_constants` gives each run one set: the median over its jobs of every constant.

The measured order of the partitioners is only as good as the measurements: where two
partitioners' steps lie closer than their run-to-run spread, the runs disagree about which
is faster. :func:`resolved_orders` keeps the pairs every run orders the same way and checks
the predicted order on those. A host's state drifts from one day to the next, and with it
which of two close partitioners is faster: :func:`pool_sweeps` joins sweeps of one
configuration made at different times, so that a pair counts as resolved only where every
run of every sweep orders it alike.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np


def job_key(cell: dict) -> tuple:
    """The job a cell was measured in: (dataset, model, partitioner, run)."""
    return cell["dataset"], cell.get("model", "gcn"), cell["method"], cell.get("run", 0)


def median_tree(trees: list) -> dict:
    """The median of every number over dicts of one shape (nested dicts recursed into; other
    values taken from the first)."""
    out = {}
    for key, value in trees[0].items():
        present = [t[key] for t in trees if key in t]
        if isinstance(value, dict):
            out[key] = median_tree(present)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = float(np.median(present))
        else:
            out[key] = value
    return out


def pool_sweeps(sweeps: list) -> list:
    """The cells of several sweeps of one configuration (each a list of cells) as one sweep:
    each sweep's runs numbered after the runs of the sweeps before it (``sweep``: its index),
    the cells otherwise unchanged."""
    out, first = [], 0
    for index, cells in enumerate(sweeps):
        runs = [c.get("run", 0) for c in cells]
        out += [{**c, "run": first + c.get("run", 0), "sweep": index} for c in cells]
        first += max(runs, default=-1) + 1
    return out


def pooled_constants(cells: list) -> dict:
    """``run -> constants``: per run, the median over its jobs of each in-job constant."""
    jobs = {}
    for cell in cells:
        jobs.setdefault(cell.get("run", 0), {})[job_key(cell)] = cell["in_job_cost_model"]
    return {run: median_tree(list(found.values())) for run, found in jobs.items()}


def resolved_orders(cells: list, fields: tuple, predicted_key: str) -> list:
    """Per group of raw cells equal in ``fields``: the partitioner pairs whose measured steps
    every run orders the same way (two runs or more), and whether ``predicted_key`` (the
    median over runs) orders each such pair alike. A group with one run resolves nothing."""
    groups = {}
    for cell in cells:
        key = tuple(cell.get(f) for f in fields)
        groups.setdefault(key, {}).setdefault(cell["method"], []).append(cell)
    out = []
    for key in sorted(groups, key=str):
        methods = groups[key]
        runs = sorted({c.get("run", 0) for cs in methods.values() for c in cs})
        measured = {m: {c.get("run", 0): c["measured_step_s"] for c in cs}
                    for m, cs in methods.items()}
        predicted = {m: float(np.median([c[predicted_key] for c in cs]))
                     for m, cs in methods.items()}
        pairs = []
        for a, b in combinations(sorted(methods), 2):
            common = [r for r in runs if r in measured[a] and r in measured[b]]
            signs = {np.sign(measured[a][r] - measured[b][r]) for r in common}
            if len(common) < 2 or len(signs) != 1 or 0 in signs:
                continue
            faster, slower = (a, b) if signs == {-1.0} else (b, a)
            pairs.append({"faster": faster, "slower": slower,
                          "predicted_alike": predicted[faster] < predicted[slower]})
        out.append({**dict(zip(fields, key)), "runs": len(runs),
                    "pairs": len(list(combinations(methods, 2))), "resolved": pairs,
                    "alike": sum(p["predicted_alike"] for p in pairs)})
    return out
