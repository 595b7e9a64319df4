"""Ranks sharing a host's cores through one pass (partitioning/shared_cores.py)."""

import numpy as np
import pytest

from partitioning.shared_cores import finish_times

ONE_HOST = np.zeros(4, dtype=int)


def test_with_enough_cores_each_rank_runs_alone():
    before, overlapped, exchange = np.array([1.0, 2.0]), np.array([3.0, 0.0]), np.array([1.0, 5.0])
    after = np.array([1.0, 1.0])
    done = finish_times([(before, overlapped, exchange)], after, np.zeros(2, int), host_cores=2)
    # before + max(overlapped, exchange) + after
    np.testing.assert_allclose(done, [1 + 3 + 1, 2 + 5 + 1])


def test_independent_work_ends_at_mcnaughtons_bound():
    work = np.array([4.8, 2.0, 0.7, 0.08])
    none = np.zeros(4)
    done = finish_times([(none, none, none)], work, ONE_HOST, host_cores=2)
    # the longest rank is not held back by the others: max(longest, total / cores)
    assert done.max() == pytest.approx(max(work.max(), work.sum() / 2))
    assert done[0] == pytest.approx(4.8)
    even = finish_times([(none, none, none)], np.ones(4), ONE_HOST, host_cores=2)
    np.testing.assert_allclose(even, [2.0] * 4)


def test_a_waiting_rank_leaves_its_core_to_the_others():
    # one core: rank 0 works 2 s while rank 1 waits 2 s for its exchange, then works 1 s
    done = finish_times([(np.zeros(2), np.array([2.0, 0.0]), np.array([0.0, 2.0]))],
                        np.array([0.0, 1.0]), np.zeros(2, int), host_cores=1)
    np.testing.assert_allclose(done, [2.0, 3.0])


def test_threads_count_against_the_cores_and_hosts_do_not_share():
    work = np.array([1.0, 1.0])
    none = np.zeros(2)
    # two ranks of 2 threads on 2 cores: each at half speed
    np.testing.assert_allclose(finish_times([(none, none, none)], work, np.zeros(2, int),
                                            host_cores=2, threads=2), [2.0, 2.0])
    # a host each
    np.testing.assert_allclose(finish_times([(none, none, none)], work, np.arange(2),
                                            host_cores=2, threads=2), [1.0, 1.0])
