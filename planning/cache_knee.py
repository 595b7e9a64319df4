"""Where a rank's data leaves the cache, as the time model sees it: the fraction of an op's data
that comes from memory for a working set, and the effective cache size fitted to measured rates.

The model interpolates each compute constant between the one calibrated on cached data and the
one calibrated beyond the cache (``g = g_cached + f (g_mem - g_cached)``) with
``f = clip((S - C) / 3C, 0, 1)`` for a working set of ``S`` bytes and a cache share ``C``
(:func:`beyond_cache_fraction`). ``C`` is not the last-level cache the operating system reports:
a virtual machine may report its host's (300 MiB here, shared with every tenant), and gathers
slow down well before they leave a real one. :func:`fit_cache_knee` finds the ``C`` whose curve
best matches the aggregation's rate measured at a ladder of working sets
(:func:`gnnscale.cli.calibrate.measure_cache_knee`); benchmarks/tune_validation.py --vcluster
checks the predictions it gives (docs/planning.md, "Checked on shaped links").
"""

from __future__ import annotations

import numpy as np

__all__ = ["beyond_cache_fraction", "fit_cache_knee", "lru_hit_share", "KNEE_STEPS_PER_OCTAVE"]

#: candidate cache sizes tried per doubling of the working set
KNEE_STEPS_PER_OCTAVE = 8


def lru_hit_share(share, rows: float) -> np.ndarray:
    """Share of each part's reads that a least-recently-used cache of ``rows`` rows serves,
    by Che's approximation: with reads falling on row ``i`` with probability ``p_i``
    independently, the cache holds the rows read within a time ``T`` that fills it,
    ``sum_i (1 - exp(-p_i T)) = rows``, and a read hits with probability ``1 - exp(-p_i T)``.

    ``share``: ``[parts, levels]``, the cumulative share of reads of each part's ``2**j``
    most-read rows (:func:`planning.workload.gather_share`); the rows of a level (from
    ``2**(j-1)`` to ``2**j``) are taken as read alike. Below the share the same cache would
    serve if it held the most-read rows, the more the reads spread; every part whose read
    rows all fit gets 1."""
    share = np.atleast_2d(np.asarray(share, dtype=np.float64))
    levels = share.shape[1]
    sizes = np.diff(np.concatenate([[0.0], 2.0 ** np.arange(levels)]))
    mass = np.diff(np.concatenate([np.zeros((share.shape[0], 1)), share], axis=1), axis=1)
    mass = np.maximum(mass, 0.0)
    p = mass / sizes
    read = np.where(mass > 0, sizes, 0.0).sum(axis=1)  # rows read at all, per part
    # bisect log T for every part at once: the rows held grow with T from 0 towards `read`
    lo, hi = np.full(share.shape[0], -60.0), np.full(share.shape[0], 80.0)
    for _ in range(48):  # log T to within 1e-12
        mid = (lo + hi) / 2
        held = (sizes * -np.expm1(-p * np.exp(mid)[:, None])).sum(axis=1)
        below = held < rows
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    hit = (mass * -np.expm1(-p * np.exp(hi)[:, None])).sum(axis=1)
    return np.where(read <= rows, 1.0, np.minimum(hit, 1.0))


def beyond_cache_fraction(working_set, cache: float):
    """Fraction of an op's data that comes from memory: 0 while its working set (bytes, per
    rank) fits the rank's share of the cache, 1 from four times that on (0 for every size
    where ``cache`` is 0: no cache model)."""
    working_set = np.asarray(working_set, dtype=np.float64)
    if cache <= 0:
        return np.zeros_like(working_set)
    return np.clip((working_set - cache) / (3.0 * cache), 0.0, 1.0)


def fit_cache_knee(working_sets, seconds_per_unit) -> float:
    """The cache share ``C`` (bytes) whose curve best fits rates measured at ``working_sets``
    (ascending bytes): the smallest size's rate is the cached one, the largest's the one beyond
    the cache, and ``C`` minimises the squared log error of the sizes between, among candidates
    from half the smallest size to the largest, :data:`KNEE_STEPS_PER_OCTAVE` per doubling.
    Where the largest size is not measured slower than the smallest (no knee in range), the
    largest size: everything measured fits."""
    sizes = np.asarray(working_sets, dtype=np.float64)
    rates = np.asarray(seconds_per_unit, dtype=np.float64)
    if sizes.ndim != 1 or sizes.size < 2 or sizes.shape != rates.shape:
        raise ValueError(f"need matching 1-d arrays of at least 2 sizes and rates, got shapes "
                         f"{sizes.shape} and {rates.shape}")
    if np.any(np.diff(sizes) <= 0) or np.any(sizes <= 0) or np.any(rates <= 0):
        raise ValueError("working sets must ascend and sizes and rates be positive")
    cached, beyond = rates[0], rates[-1]
    if beyond <= cached:
        return float(sizes[-1])
    octaves = np.log2(sizes[-1] / sizes[0]) + 1.0
    candidates = sizes[0] / 2.0 * 2.0 ** (np.arange(int(octaves * KNEE_STEPS_PER_OCTAVE) + 1)
                                          / KNEE_STEPS_PER_OCTAVE)
    errors = [np.sum((np.log(cached + beyond_cache_fraction(sizes, c) * (beyond - cached))
                      - np.log(rates)) ** 2) for c in candidates]
    return float(candidates[int(np.argmin(errors))])
