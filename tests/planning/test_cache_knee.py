"""The cache share the time model divides work at: its curve, and the share fitted to rates
measured at a ladder of working sets (the measurement itself: tests/cli/test_cli_calibrate.py)."""

import numpy as np
import pytest

from planning.cache_knee import KNEE_STEPS_PER_OCTAVE, beyond_cache_fraction, fit_cache_knee

MIB = 1 << 20
LADDER = [MIB << k for k in range(7)] + [256 * MIB]  # 1 MiB ... 64 MiB, and beyond


def test_the_fraction_beyond_the_cache_rises_from_the_share_to_four_times_it():
    sizes = np.array([0.5, 1, 2, 2.5, 4, 8]) * MIB
    assert beyond_cache_fraction(sizes, MIB).tolist() == [0, 0, 1 / 3, 0.5, 1, 1]
    assert beyond_cache_fraction(sizes, 0.0).tolist() == [0] * 6  # no cache model


@pytest.mark.parametrize("share", [3 * MIB, 8 * MIB, 20 * MIB])
def test_a_curve_of_the_models_shape_gives_back_its_share(share):
    cached, beyond = 2e-10, 7e-10
    rates = cached + beyond_cache_fraction(LADDER, share) * (beyond - cached)
    fitted = fit_cache_knee(LADDER, rates)
    assert abs(np.log2(fitted / share)) <= 1 / KNEE_STEPS_PER_OCTAVE


def test_a_measured_gradual_curve_gives_a_share_between_its_ends():
    # the aggregation's rate per edge value measured on a virtual machine that reports a
    # 300 MiB last-level cache: it rises from 4 MiB on
    rates = np.array([2.23, 2.19, 2.42, 2.67, 3.49, 4.44, 5.15, 7.26]) * 1e-10
    fitted = fit_cache_knee(LADDER, rates)
    assert 4 * MIB < fitted < 32 * MIB


def test_no_knee_in_range_means_everything_fits():
    assert fit_cache_knee(LADDER, [3e-10] * len(LADDER)) == LADDER[-1]
    assert fit_cache_knee(LADDER, np.linspace(3e-10, 2e-10, len(LADDER))) == LADDER[-1]


@pytest.mark.parametrize("sizes, rates", [([MIB], [1e-10]), ([2 * MIB, MIB], [1e-10, 2e-10]),
                                          ([MIB, 2 * MIB], [1e-10, 0.0]),
                                          ([MIB, 2 * MIB], [1e-10])])
def test_bad_measurements_are_refused(sizes, rates):
    with pytest.raises(ValueError):
        fit_cache_knee(sizes, rates)
