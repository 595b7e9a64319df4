"""HDRF streaming vertex cut (Petroni et al., "HDRF: Stream-Based Partitioning for Power-Law
Graphs", CIKM 2015).

Edges stream in a seeded random order. With partial degrees ``d(u), d(v)`` (edges of each node
seen so far, this one included), ``theta(u) = d(u) / (d(u) + d(v))`` and replica sets ``A``, edge
``u -> v`` goes to ``argmax_p C_rep(p) + C_bal(p)`` where

* ``C_rep(p) = g(u, p) + g(v, p)``, ``g(x, p) = 1 + (1 - theta(x))`` if ``p`` in ``A(x)`` else 0
  (prefer parts that already hold the lower-degree endpoint: hubs get replicated);
* ``C_bal(p) = lam * (maxload - load(p)) / (eps + maxload - minload)``.

``C_rep`` takes one value on each of ``A(u) & A(v)``, ``A(u) - A(v)``, ``A(v) - A(u)`` and the
rest, and ``C_bal`` falls with the load, so the winner is the least loaded part of one of these
four sets: only four candidates are scored per edge (exactly the full argmax; among equally
loaded parts of a set the choice is deterministic, see :func:`.common.least_loaded_in`).
Masters: see :mod:`.common`.
"""

from __future__ import annotations

import numba
import numpy as np

from ..errors import PartitionError
from .common import (BOTH, ONLY_FIRST, StreamingVertexCut, has_part, least_loaded,
                     least_loaded_in, new_load_tracker, place_edge)


@numba.njit(cache=True)
def _score(bits, u, v, p, theta_u, theta_v, loads, max_load, min_load, lam, eps):
    rep = 0.0
    if has_part(bits, u, p):
        rep += 2.0 - theta_u
    if has_part(bits, v, p):
        rep += 2.0 - theta_v
    return rep + lam * (max_load - loads[p]) / (eps + max_load - min_load)


@numba.njit(cache=True)
def _hdrf(src, dst, order, num_parts, lam, eps, bits, partial, edge_parts):
    loads = np.zeros(num_parts, dtype=np.int64)
    candidates = np.empty(4, dtype=np.int64)
    max_load = 0
    tracker = new_load_tracker(num_parts)
    for e in order:
        u = src[e]
        v = dst[e]
        partial[u] += 1
        if v != u:
            partial[v] += 1
        theta_u = partial[u] / (partial[u] + partial[v])
        theta_v = 1.0 - theta_u
        lightest = least_loaded(loads, tracker, num_parts)
        min_load = loads[lightest]
        candidates[0] = lightest
        candidates[1] = least_loaded_in(bits, u, v, BOTH, loads, num_parts, lightest)
        candidates[2] = least_loaded_in(bits, u, v, ONLY_FIRST, loads, num_parts, lightest)
        candidates[3] = least_loaded_in(bits, v, u, ONLY_FIRST, loads, num_parts, lightest)
        best = -1
        best_score = -np.inf
        for p in candidates:
            if p < 0:
                continue
            s = _score(bits, u, v, p, theta_u, theta_v, loads, max_load, min_load, lam, eps)
            if s > best_score or (s == best_score and p < best):
                best = p
                best_score = s
        place_edge(bits, loads, tracker, edge_parts, e, u, v, best, num_parts)
        if loads[best] > max_load:
            max_load = loads[best]
    return edge_parts


class HDRFPartitioner(StreamingVertexCut):
    """High-Degree (are) Replicated First streaming vertex cut.

    Args:
        num_parts: number of parts.
        seed: seed of the random edge order and of the placement of isolated nodes (default 0).
        lam: weight of the balance term (default 1.0; larger balances edges more tightly at the
            cost of replication).
        eps: small constant in the balance term's denominator (default 1.0).
        master: how each node's master replica is chosen, ``"most_edges"`` (default) or
            ``"balanced"`` (see :func:`.common.choose_masters`).
    """

    name = "hdrf"
    defaults = {"lam": 1.0, "eps": 1.0, "master": "most_edges"}

    def _check_params(self):
        for key in ("lam", "eps"):
            value = self.method_params[key]
            if not isinstance(value, (int, float)) or value <= 0:
                raise PartitionError(f"{key}={value!r} must be a positive number")
        super()._check_params()

    def _assign(self, graph, src, dst, order, bits, edge_parts):
        partial = np.zeros(graph.num_nodes, dtype=np.int64)  # partial degrees
        _hdrf(src, dst, order, self.num_parts, float(self.method_params["lam"]),
              float(self.method_params["eps"]), bits, partial, edge_parts)
