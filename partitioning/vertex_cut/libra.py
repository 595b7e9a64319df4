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

from ..base import Partitioner
from ..csr_ops import csr_destinations, transpose_csr
from .common import (ANY, BOTH, add_load, add_part, check_master, choose_masters, degrees,
                     is_empty, least_loaded, least_loaded_in, new_load_tracker, num_words)


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
        add_part(bits, u, p)
        add_part(bits, v, p)
        add_load(loads, tracker, p, num_parts)
        edge_parts[e] = p
    return edge_parts


class LibraPartitioner(Partitioner):
    """Libra greedy vertex cut (DistGNN): balances edges, replicates high-degree nodes.

    Args:
        num_parts: number of parts.
        seed: seed of the random edge order and of the placement of isolated nodes (default 0).
        master: how each node's master replica is chosen, ``"most_edges"`` (default) or
            ``"balanced"`` (see :func:`.common.choose_masters`).
    """

    name = "libra"
    kind = "vertex_cut"
    defaults = {"master": "most_edges"}

    def _check_params(self):
        check_master(self.method_params["master"])

    def _partition(self, graph, train_mask):
        p = self.num_parts
        rng = np.random.default_rng(self.seed)
        order = rng.permutation(graph.num_edges)
        dst = csr_destinations(graph.indptr, graph.num_edges)
        bits = np.zeros((graph.num_nodes, num_words(p)), dtype=np.uint64)  # replica sets
        edge_parts = np.empty(graph.num_edges, dtype=np.int32)
        _libra(graph.indices, dst, order, degrees(graph), p, bits, edge_parts)
        del bits
        del dst, order
        out_csr = transpose_csr(graph.indptr, graph.indices, graph.num_nodes)
        return choose_masters(graph, edge_parts, p, self.seed, self.method_params["master"],
                              out_csr), edge_parts
