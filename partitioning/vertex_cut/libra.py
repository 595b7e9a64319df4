"""Libra vertex cut, the partitioner of DistGNN (Md et al., SC 2021; Xie et al., NeurIPS 2014).

Edges stream in a seeded random order (a sorted edge list would pour whole components into one
part). For edge ``u -> v`` with replica sets ``A(u)``, ``A(v)`` and per-part edge loads:

1. neither endpoint placed yet: the least loaded part overall;
2. only one placed: the least loaded part of its replica set;
3. both placed and ``A(u) & A(v)`` non-empty: the least loaded part of the intersection;
4. both placed, disjoint: the least loaded part of the lower-degree endpoint's set, so the
   higher-degree endpoint is the one replicated (power-law graphs have few hubs, and replicating
   them is cheap relative to the edges they bring together).

"Least loaded" is exact; among equally loaded parts the choice is deterministic (a globally least
loaded part when the set holds one, else the lowest id). Masters: see :mod:`.common`. Time
``O(E * (P / 64 + replicas))`` at worst, memory ``O(E + N * P / 64)``.
"""

from __future__ import annotations

import numba
import numpy as np

from .common import (ANY, BOTH, StreamingVertexCut, degrees, is_empty, least_loaded,
                     least_loaded_in, new_load_tracker, place_edge)


@numba.njit(cache=True)
def _libra(src, dst, order, degree, num_parts, bits, edge_parts):
    loads = np.zeros(num_parts, dtype=np.int64)
    tracker = new_load_tracker(num_parts)
    for e in order:
        u = src[e]
        v = dst[e]
        u_new = is_empty(bits, u)
        v_new = is_empty(bits, v)
        lightest = least_loaded(loads, tracker, num_parts)
        if u_new and v_new:
            p = lightest
        elif v_new:
            p = least_loaded_in(bits, u, u, ANY, loads, num_parts, lightest)
        elif u_new:
            p = least_loaded_in(bits, v, v, ANY, loads, num_parts, lightest)
        else:
            p = least_loaded_in(bits, u, v, BOTH, loads, num_parts, lightest)
            if p < 0:
                low = u if degree[u] < degree[v] else v
                p = least_loaded_in(bits, low, low, ANY, loads, num_parts, lightest)
        place_edge(bits, loads, tracker, edge_parts, e, u, v, p, num_parts)
    return edge_parts


class LibraPartitioner(StreamingVertexCut):
    """Libra greedy vertex cut (DistGNN): balances edges, replicates high-degree nodes.

    Args:
        num_parts: number of parts.
        seed: seed of the random edge order and of the placement of isolated nodes (default 0).
        master: how each node's master replica is chosen, ``"most_edges"`` (default) or
            ``"balanced"`` (see :func:`.common.choose_masters`).
    """

    name = "libra"
    defaults = {"master": "most_edges"}

    def _assign(self, graph, src, dst, order, bits, edge_parts):
        _libra(src, dst, order, degrees(graph), self.num_parts, bits, edge_parts)
