"""A step's timeline of ranks exchanging and sharing cores (planning/shared_cores.py)."""

import numpy as np
import pytest

from planning.shared_cores import latest_pass_ends, noise_samples, pass_ends

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


def test_without_noise_the_latest_end_is_the_slowest_ranks():
    rng = np.random.default_rng(2)
    passes = [([(rng.random(4), rng.random(4), rng.random(4))], rng.random(4)) for _ in range(3)]
    np.testing.assert_allclose(latest_pass_ends(passes, EVERYONE, ONE_HOST),
                               pass_ends(passes, EVERYONE, ONE_HOST).max(axis=1))


def test_with_noise_each_rank_alone_keeps_its_mean_time():
    passes = [([(np.array([1e-3, 2e-3]), np.array([3e-3, 1e-3]), 0.0)], 1e-3)] * 3
    np.testing.assert_allclose(pass_ends(passes, np.zeros((2, 2), bool), np.arange(2),
                                         noise=1e-4),
                               pass_ends(passes, np.zeros((2, 2), bool), np.arange(2)), rtol=0.02)


def test_balanced_ranks_meet_later_by_their_jitter_and_imbalanced_ones_do_not():
    noise, work = 1e-4, 0.01  # a rank's 10 ms vary by 1 ms (sd)
    balanced = ([(np.array([work, work]), 0.0, 0.0)], 0.0)
    end = latest_pass_ends([balanced], ~np.eye(2, dtype=bool), np.arange(2), noise=noise)
    expected = work + np.sqrt(noise * work / np.pi)  # the mean of the later of two
    assert end[0] == pytest.approx(expected, rel=0.01)
    # one rank 5 sd behind the other: the meeting is the slow one's end
    uneven = ([(np.array([work, 1.5 * work]), 0.0, 0.0)], 0.0)
    end = latest_pass_ends([uneven], ~np.eye(2, dtype=bool), np.arange(2), noise=noise)
    assert end[0] == pytest.approx(1.5 * work, rel=0.01)


def test_jitter_accumulates_over_the_passes_until_the_ranks_meet():
    noise, work = 1e-4, 0.005
    one = ([(np.array([work, work]), work, 0.0)], 0.0)  # nobody waits within the step
    ends = latest_pass_ends([one] * 4, np.zeros((2, 2), bool), np.arange(2), noise=noise)
    busy = 2 * work * np.arange(1, 5)
    np.testing.assert_allclose(ends, busy + np.sqrt(noise * busy / np.pi), rtol=0.01)


def test_more_ranks_wait_longer_for_their_latest():
    noise, work = 1e-4, 0.01
    waits = []
    for p in (2, 8, 64):
        one = ([(np.full(p, work), 0.0, 0.0)], 0.0)
        waits.append(latest_pass_ends([one], np.zeros((p, p), bool), np.arange(p),
                                      noise=noise)[0] - work)
    assert 0 < waits[0] < waits[1] < waits[2] < 3 * np.sqrt(noise * work)
    assert noise_samples(2) == 4096 and noise_samples(1024) == 16


def test_ranks_sharing_cores_are_modelled_without_noise():
    rng = np.random.default_rng(3)
    passes = [([(rng.random(4), rng.random(4), rng.random(4))], rng.random(4))]
    np.testing.assert_allclose(
        latest_pass_ends(passes, EVERYONE, ONE_HOST, host_cores=2, noise=1e-2),
        pass_ends(passes, EVERYONE, ONE_HOST, host_cores=2).max(axis=1))


def test_the_senders_latest_post_is_the_same_a_few_draws_at_a_time(monkeypatch):
    import planning.shared_cores as sc

    rng = np.random.default_rng(4)
    post, senders = rng.random((10, 5)), rng.random((5, 5)) < 0.5
    senders[0] = False  # a rank without senders
    expected = np.array([[max((post[d, j] for j in range(5) if senders[i, j]), default=-np.inf)
                          for i in range(5)] for d in range(10)])
    np.testing.assert_array_equal(sc._senders_latest(post, senders), expected)
    monkeypatch.setattr(sc, "SENDER_CHUNK", 60)  # two draws at a time, the last one alone
    np.testing.assert_array_equal(sc._senders_latest(post, senders), expected)
