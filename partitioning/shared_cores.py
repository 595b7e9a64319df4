"""Ranks working through one pass of a layer while they share their host's cores.

A rank's pass is a list of stages, each ``(before, overlapped, exchange)``, then ``after``: it
works ``before``, posts its exchange, works ``overlapped`` while the exchange travels, waits
until the exchange ends (``exchange`` seconds after its post), and after its last stage works
``after``. Work amounts are seconds of a rank with its cores to itself.

Where a host's working ranks have more threads than it has cores, the cores go to the ranks
with the most work left in the pass: each progresses at ``min(1, lambda R)``, ``R`` its work
left, ``lambda`` such that the host's ``C`` cores are used (``sum t min(1, lambda R) = C`` for
ranks of ``t`` threads). For ranks that do not wait this finishes the pass at the earliest
possible time, ``max(longest, total / C)`` (McNaughton's bound), which is what the scheduler
of a host approaches by migrating ranks between cores: a rank with little work does not hold
back one with much. A rank that waits for its exchange leaves its cores to the others. With
enough cores every rank runs at full speed and finishes at ``sum(before + max(overlapped,
exchange)) + after``.

:func:`finish_times` steps from event to event (a rank ends a piece of work, or an exchange
ends), so its cost grows with the ranks times the stages.
"""

from __future__ import annotations

import numpy as np

__all__ = ["finish_times"]

_WORK, _POST, _WAIT = 0, 1, 2
_EPS = 1e-15


def finish_times(stages: list, after, hosts, host_cores: float, threads: int = 1) -> np.ndarray:
    """Seconds at which each rank finishes its pass (all start at 0).

    Args:
        stages: ``(before, overlapped, exchange)`` per stage, each a per-rank array (seconds).
        after: per-rank work after the last stage (seconds).
        hosts: host index of each rank.
        host_cores: cores of each host.
        threads: threads of each rank.
    """
    after = np.asarray(after, dtype=np.float64)
    p = after.size
    hosts = np.asarray(hosts)
    kinds, amounts, stage_of = [], [], []
    for s, (before, overlapped, exchange) in enumerate(stages):
        for kind, amount in ((_WORK, before), (_POST, exchange), (_WORK, overlapped),
                             (_WAIT, 0.0)):
            kinds.append(kind)
            amounts.append(np.broadcast_to(np.asarray(amount, dtype=np.float64), (p,)))
            stage_of.append(s)
    kinds.append(_WORK)
    amounts.append(after)
    stage_of.append(-1)
    kinds, stage_of = np.asarray(kinds), np.asarray(stage_of)
    amounts = np.stack(amounts, axis=1)  # [rank, op]
    ops = kinds.size
    work = np.where(kinds == _WORK, amounts, 0.0)
    later = np.cumsum(work[:, ::-1], axis=1)[:, ::-1] - work  # work after each op
    later = np.concatenate([later, np.zeros((p, 1))], axis=1)
    ranks = np.arange(p)
    op = np.zeros(p, dtype=np.int64)
    left = amounts[:, 0].copy()
    wait_end = np.zeros(p)
    finish = np.zeros(p)
    now = 0.0
    while True:
        # instantaneous steps: finished work, posts, exchanges that have ended
        while True:
            active = op < ops
            kind = np.where(active, kinds[np.minimum(op, ops - 1)], -1)
            posting = kind == _POST
            wait_end[posting] = now + amounts[ranks[posting], op[posting]]
            step = ((kind == _WORK) & (left <= _EPS)) | posting | \
                ((kind == _WAIT) & (wait_end <= now + _EPS))
            if not step.any():
                break
            op[step] += 1
            done = step & (op >= ops)
            finish[done] = now
            moved = step & (op < ops)
            left[moved] = amounts[ranks[moved], op[moved]]
        if not active.any():
            return finish
        working = kind == _WORK
        rate = np.zeros(p)
        for host in np.unique(hosts[working]):
            mine = working & (hosts == host)
            rate[mine] = _shares(left[mine] + later[ranks[mine], op[mine]],
                                 host_cores / threads)
        waiting = kind == _WAIT
        dt = min(np.min(left[working] / rate[working], initial=np.inf),
                 np.min(wait_end[waiting] - now, initial=np.inf))
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
