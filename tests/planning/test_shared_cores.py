"""A step's timeline of ranks exchanging and sharing cores (planning/shared_cores.py)."""

import numpy as np
import pytest

from planning.shared_cores import pass_ends

EVERYONE = ~np.eye(4, dtype=bool)
NOBODY = np.zeros((4, 4), dtype=bool)
ONE_HOST = np.zeros(4, dtype=int)


def test_with_enough_cores_each_rank_runs_alone_until_its_senders_post():
    before, overlapped, exchange = np.array([1.0, 2.0]), np.array([3.0, 0.0]), \
        np.array([1.0, 5.0])
    after = np.array([1.0, 1.0])
    alone = pass_ends([([(before, overlapped, exchange)], after)], np.zeros((2, 2), bool),
                      np.zeros(2, int))
    np.testing.assert_allclose(alone[0], [1 + 3 + 1, 2 + 5 + 1])  # before + max(...) + after
    # rank 0 receives from rank 1, which posts only at 5 s
    coupled = pass_ends([([(np.array([0.0, 5.0]), 0.0, 1.0)], 0.0)],
                        np.array([[False, True], [False, False]]), np.zeros(2, int))
    np.testing.assert_allclose(coupled[0], [5.0, 6.0])


def test_a_rank_ahead_runs_on_into_its_next_pass():
    one = ([(np.array([1.0, 3.0]), 0.0, 0.0)], 0.0)
    ends = pass_ends([one, one], np.zeros((2, 2), bool), np.zeros(2, int))
    np.testing.assert_allclose(ends, [[1.0, 3.0], [2.0, 6.0]])  # no barrier between passes


def test_shared_cores_match_the_closed_form_as_they_become_enough():
    rng = np.random.default_rng(0)
    passes = [([(rng.random(4), rng.random(4), rng.random(4)) for _ in range(2)], rng.random(4))
              for _ in range(3)]
    alone = pass_ends(passes, EVERYONE, ONE_HOST, host_cores=4)
    nearly = pass_ends(passes, EVERYONE, ONE_HOST, host_cores=4 - 1e-6)
    np.testing.assert_allclose(nearly, alone, rtol=1e-5)


def test_independent_work_ends_at_mcnaughtons_bound():
    work = np.array([4.8, 2.0, 0.7, 0.08])
    ends = pass_ends([([], work)], NOBODY, ONE_HOST, host_cores=2)[0]
    # the longest rank is not held back by the others: max(longest, total / cores)
    assert ends.max() == pytest.approx(max(work.max(), work.sum() / 2))
    assert ends[0] == pytest.approx(4.8)
    even = pass_ends([([], np.ones(4))], NOBODY, ONE_HOST, host_cores=2)[0]
    np.testing.assert_allclose(even, [2.0] * 4)


def test_a_waiting_rank_leaves_its_core_to_the_others():
    # one core: rank 0 works 2 s while rank 1 waits 2 s for its exchange, then works 1 s
    ends = pass_ends([([(np.zeros(2), np.array([2.0, 0.0]), np.array([0.0, 2.0]))],
                       np.array([0.0, 1.0]))], np.zeros((2, 2), bool), np.zeros(2, int),
                     host_cores=1)
    np.testing.assert_allclose(ends[0], [2.0, 3.0])


def test_threads_count_against_the_cores_and_hosts_do_not_share():
    work = np.array([1.0, 1.0])
    none = np.zeros((2, 2), dtype=bool)
    # two ranks of 2 threads on 2 cores: each at half speed
    np.testing.assert_allclose(pass_ends([([], work)], none, np.zeros(2, int), host_cores=2,
                                         threads=2)[0], [2.0, 2.0])
    # a host each
    np.testing.assert_allclose(pass_ends([([], work)], none, np.arange(2), host_cores=2,
                                         threads=2)[0], [1.0, 1.0])
