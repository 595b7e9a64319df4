"""A training step's timeline: each rank works through its passes, exchanging with its peers.

A pass (one layer's forward or backward on one rank) is a list of stages, each ``(before,
overlapped, exchange)``, then ``after``: the rank works ``before``, posts its exchange, works
``overlapped`` while it travels, waits until the exchange ends, and after its last stage works
``after``. Work amounts are seconds of a rank with its cores to itself. An exchange ends
``exchange`` seconds after the rank's own post, and not before every peer it receives from has
posted its rows for the same stage: the ranks are coupled only by the data they exchange, so a
rank that is ahead runs on into its next pass.

Where a host's working ranks have more threads than it has cores, the cores go to the ranks
with the most work left in the step: each progresses at ``min(1, lambda R)``, ``R`` its work
left, ``lambda`` such that the host's ``C`` cores are used (``sum t min(1, lambda R) = C`` for
ranks of ``t`` threads). For ranks that do not wait this ends at the earliest possible time,
``max(longest, total / C)`` (McNaughton's bound), which the scheduler of a host approaches by
migrating ranks between cores: a rank with little work does not hold back one with much. A
rank that waits leaves its cores to the others.

:func:`pass_ends` computes the time each rank ends each pass: in closed form where every rank
has its cores to itself, else from event to event (a rank ends a piece of work, or an
exchange ends).

With ``noise`` (seconds), every rank's work varies, independently of the others', its variance
``noise`` times the work (interruptions, timer ticks, cache misses arriving while it works),
and the timeline is the mean over draws of that jitter: ranks that meet (an exchange, and the
gradient allreduce after the step) wait for whichever of them jitter delayed most, which
costs balanced ranks most: two of ``w`` seconds each meet ``sqrt(noise w / pi)`` after ``w``
on average, where a rank far ahead does not wait at all. Ranks that share cores are modelled
without it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["latest_pass_ends", "noise_samples", "pass_ends"]

_WORK, _POST, _WAIT, _END = 0, 1, 2, 3
_EPS = 1e-15


def pass_ends(passes: list, senders: np.ndarray, hosts, host_cores: float | None = None,
              threads: int = 1, noise: float = 0.0) -> np.ndarray:
    """Seconds at which each rank ends each pass (``[pass, rank]``; all start at 0).

    Args:
        passes: ``(stages, after)`` per pass, in the order every rank runs them; ``stages`` a
            list of ``(before, overlapped, exchange)``; each amount a per-rank array (seconds).
            Every rank has the same number of stages per pass.
        senders: ``senders[p, q]`` true where rank ``p`` receives rows from rank ``q``.
        hosts: host index of each rank.
        host_cores: cores of each host (None: as many as its ranks' threads).
        threads: threads of each rank.
        noise: variance of a rank's busy time per second of work (seconds; 0: none), for
            ranks with their cores to themselves.
    """
    hosts = np.asarray(hosts)
    senders = np.asarray(senders, dtype=bool)
    p = hosts.size
    if _crowded(hosts, host_cores, threads):
        return _shared(passes, senders, hosts, host_cores / threads, p)
    return _alone(passes, senders, p, noise).mean(axis=0)


def _crowded(hosts: np.ndarray, host_cores: float | None, threads: int) -> bool:
    """Whether a host's ranks have more threads than it has cores."""
    return host_cores is not None and np.bincount(hosts).max() * threads > host_cores + _EPS


def _as_rank_array(value, p: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(value, dtype=np.float64), (p,))


def _ready(posted_rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Latest post among each rank's senders (``-inf`` without senders, NaN where one of them
    has not posted yet)."""
    return np.where(mask, posted_rows, -np.inf).max(axis=1)


#: noise draws the timeline averages where ranks jitter: as many as keep a stage's meeting to
#: about 2**23 comparisons (draws x ranks x ranks) and its draws to 2**17 (draws x ranks),
#: within these bounds
NOISE_SAMPLES = (16, 4096)


def noise_samples(p: int) -> int:
    """Draws of the ranks' jitter the timeline averages for ``p`` ranks."""
    low, high = NOISE_SAMPLES
    p = max(1, p)
    return int(min(high, max(low, min(2**23 // (p * p), 2**17 // p))))


def _alone(passes: list, senders: np.ndarray, p: int, noise: float = 0.0) -> np.ndarray:
    """Every rank at full speed: a stage ends at ``max(post + overlapped, post + exchange,
    the senders' posts)``; ``[draw, pass, rank]``. Without ``noise`` one draw, the amounts as
    given; with it :func:`noise_samples` draws of every rank's work, an amount ``w`` lasting a
    gamma-distributed time of mean ``w`` and variance ``noise w`` (a sum of many short
    interruptions; never negative). The draws are the same for the same arguments, so that
    two partitions are compared on the same luck."""
    rng = np.random.default_rng(0)
    draws = noise_samples(p) if noise > 0 else 1

    def lasting(work) -> np.ndarray:
        work = _as_rank_array(work, p)
        if noise <= 0:
            return work[None]
        return rng.gamma(np.broadcast_to(work / noise, (draws, p)), noise)

    now = np.zeros((draws, p))
    ends = []
    for stages, after in passes:
        for before, overlapped, exchange in stages:
            post = now + lasting(before)
            ready = _senders_latest(post, senders)
            now = np.maximum.reduce([post + lasting(overlapped),
                                     post + _as_rank_array(exchange, p), ready])
        now = now + lasting(after)
        ends.append(now)
    return np.stack(ends, axis=1)


#: elements of the temporary ``[draws, rank, sender]`` array :func:`_senders_latest` makes
SENDER_CHUNK = 2**22


def _senders_latest(post: np.ndarray, senders: np.ndarray) -> np.ndarray:
    """``[draw, rank]``: the latest post among each rank's senders in each draw (``-inf``
    without senders), a few draws at a time so that the temporary stays within
    :data:`SENDER_CHUNK` elements."""
    samples, p = post.shape
    ready = np.empty_like(post)
    step = max(1, SENDER_CHUNK // (p * p))
    for first in range(0, samples, step):
        ready[first:first + step] = np.where(senders[None], post[first:first + step, None, :],
                                             -np.inf).max(axis=2)
    return ready


def latest_pass_ends(passes: list, senders: np.ndarray, hosts, host_cores: float | None = None,
                     threads: int = 1, noise: float = 0.0) -> np.ndarray:
    """Seconds at which the last rank ends each pass (``[pass]``), with :func:`pass_ends`'
    arguments: with ``noise``, the mean over the draws of the latest rank's end (the gradient
    allreduce after a pass meets every rank, so it waits for the one jitter delayed most)."""
    hosts = np.asarray(hosts)
    if noise <= 0 or _crowded(hosts, host_cores, threads):
        return pass_ends(passes, senders, hosts, host_cores, threads).max(axis=1)
    ends = _alone(passes, np.asarray(senders, dtype=bool), hosts.size, noise)
    return ends.max(axis=2).mean(axis=0)


def _shared(passes: list, senders: np.ndarray, hosts: np.ndarray, capacity: float,
            p: int) -> np.ndarray:
    kinds, amounts, tags = [], [], []
    stage = 0
    for index, (stages, after) in enumerate(passes):
        for before, overlapped, exchange in stages:
            for kind, amount in ((_WORK, before), (_POST, exchange), (_WORK, overlapped),
                                 (_WAIT, 0.0)):
                kinds.append(kind)
                amounts.append(_as_rank_array(amount, p))
                tags.append(stage)
            stage += 1
        kinds += [_WORK, _END]
        amounts += [_as_rank_array(after, p), np.zeros(p)]
        tags += [-1, index]
    kinds, tags = np.asarray(kinds), np.asarray(tags)
    amounts = np.stack(amounts, axis=1)  # [rank, op]
    ops = kinds.size
    work = np.where(kinds == _WORK, amounts, 0.0)
    later = np.concatenate([np.cumsum(work[:, ::-1], axis=1)[:, ::-1] - work,
                            np.zeros((p, 1))], axis=1)  # work after each op
    ranks = np.arange(p)
    posted = np.full((max(stage, 1), p), np.nan)
    ends = np.zeros((len(passes), p))
    op = np.zeros(p, dtype=np.int64)
    left = amounts[:, 0].copy()
    wait_end = np.full(p, np.inf)
    now = 0.0
    while True:
        while True:  # what takes no time: finished work, posts, ended exchanges, pass ends
            active = op < ops
            at = np.minimum(op, ops - 1)
            kind = np.where(active, kinds[at], -1)
            posting = kind == _POST
            posted[tags[at[posting]], ranks[posting]] = now
            wait_end[posting] = now + amounts[ranks[posting], at[posting]]
            waiting = kind == _WAIT
            if waiting.any():
                ready = _ready(posted[tags[at[waiting]]], senders[waiting])
                known = ~np.isnan(ready)
                idx = ranks[waiting][known]
                wait_end[idx] = np.maximum(wait_end[idx], ready[known])
                unknown = ranks[waiting][~known]
            else:
                unknown = ranks[:0]
            ending = kind == _END
            ends[tags[at[ending]], ranks[ending]] = now
            step = ((kind == _WORK) & (left <= _EPS)) | posting | ending | \
                (waiting & (wait_end <= now + _EPS))
            step[unknown] = False
            if not step.any():
                break
            op[step] += 1
            moved = step & (op < ops)
            left[moved] = amounts[ranks[moved], op[moved]]
            wait_end[step & (kind == _WAIT)] = np.inf
        if not active.any():
            return ends
        working = kind == _WORK
        rate = np.zeros(p)
        for host in np.unique(hosts[working]):
            mine = working & (hosts == host)
            rate[mine] = _shares(left[mine] + later[ranks[mine], op[mine]], capacity)
        timed = waiting.copy()
        timed[unknown] = False
        dt = min(np.min(left[working] / rate[working], initial=np.inf),
                 np.min(wait_end[timed] - now, initial=np.inf))
        if not np.isfinite(dt):
            raise RuntimeError("timeline stalled: a rank waits for a peer that never posts")
        now += dt
        left[working] -= rate[working] * dt


def _shares(remaining: np.ndarray, capacity: float) -> np.ndarray:
    """Rates ``min(1, lambda remaining)`` summing to ``capacity`` (all 1 where they fit)."""
    if remaining.size <= capacity:
        return np.ones_like(remaining)
    order = np.sort(remaining)[::-1]
    # the k largest run at full speed, the rest share what is left in proportion to their work
    for capped in range(int(capacity) + 1):
        rest = order[capped:].sum()
        lam = (capacity - capped) / rest if rest > 0 else np.inf
        if capped == order.size or lam * order[capped] <= 1.0:
            break
    return np.minimum(1.0, lam * remaining)
