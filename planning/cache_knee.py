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

__all__ = ["beyond_cache_fraction", "fit_cache_knee", "KNEE_STEPS_PER_OCTAVE"]

#: candidate cache sizes tried per doubling of the working set
KNEE_STEPS_PER_OCTAVE = 8


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
