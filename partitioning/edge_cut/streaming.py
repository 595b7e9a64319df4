"""One-pass streaming edge cuts: LDG and Fennel (optionally re-streamed).

Nodes arrive in a seeded random order; each goes to the part that scores best given where its
already-placed neighbours (in- and out-neighbours) are:

* LDG (Stanton & Kliot, KDD 2012): ``argmax_i |N(v) & P_i| * (1 - |P_i| / C)``.
* Fennel (Tsourakakis et al., WSDM 2014):
  ``argmax_i |N(v) & P_i| - alpha * gamma * |P_i| ** (gamma - 1)``, with
  ``alpha = sqrt(P) * E / N ** gamma`` (``E`` directed edges; a symmetric graph counts every
  neighbour twice on both sides of the score, so the scale is consistent).

Both respect a hard capacity ``C = ceil(slack * N / P)``; ties go to the smaller part, then the
lower id. ``passes > 1`` re-streams (Nishimura & Ugander, KDD 2013): each later pass removes the
node from its part and re-places it seeing every neighbour's current part. Memory is
``O(N + E)`` (the graph plus its transpose); time ``O(passes * (E + N * P))``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..base import Partitioner
from ..csr_ops import transpose_csr
from ..errors import PartitionError

LDG, FENNEL = 0, 1


@numba.njit(cache=True)
def _stream_nodes(in_indptr, in_idx, out_indptr, out_idx, order, num_parts, capacity, mode,
                  alpha, gamma, passes, parts):
    sizes = np.zeros(num_parts, dtype=np.int64)
    conn = np.zeros(num_parts, dtype=np.float64)
    # Fennel's size penalty per part, updated only for the parts whose size changes.
    penalty = np.zeros(num_parts, dtype=np.float64)
    for _ in range(passes):
        for v in order:
            old = parts[v]
            if old >= 0:
                sizes[old] -= 1
                if mode == FENNEL:
                    penalty[old] = alpha * gamma * sizes[old] ** (gamma - 1.0)
            for j in range(in_indptr[v], in_indptr[v + 1]):
                p = parts[in_idx[j]]
                if p >= 0 and in_idx[j] != v:
                    conn[p] += 1.0
            for j in range(out_indptr[v], out_indptr[v + 1]):
                p = parts[out_idx[j]]
                if p >= 0 and out_idx[j] != v:
                    conn[p] += 1.0
            best = -1
            best_score = -np.inf
            for q in range(num_parts):
                if sizes[q] >= capacity:
                    continue
                if mode == LDG:
                    score = conn[q] * (1.0 - sizes[q] / capacity)
                else:
                    score = conn[q] - penalty[q]
                if score > best_score or (score == best_score and sizes[q] < sizes[best]):
                    best = q
                    best_score = score
            parts[v] = best
            sizes[best] += 1
            if mode == FENNEL:
                penalty[best] = alpha * gamma * sizes[best] ** (gamma - 1.0)
            for j in range(in_indptr[v], in_indptr[v + 1]):
                p = parts[in_idx[j]]
                if p >= 0:
                    conn[p] = 0.0
            for j in range(out_indptr[v], out_indptr[v + 1]):
                p = parts[out_idx[j]]
                if p >= 0:
                    conn[p] = 0.0
            if old >= 0:
                conn[old] = 0.0


class _StreamingPartitioner(Partitioner):
    kind = "edge_cut"
    _mode = LDG

    def _check_params(self):
        slack = self.method_params["slack"]
        if not isinstance(slack, (int, float)) or not 1.0 <= slack <= 10.0:
            raise PartitionError(f"slack={slack!r} must be a number in [1, 10]")
        passes = self.method_params["passes"]
        if isinstance(passes, bool) or not isinstance(passes, (int, np.integer)) or passes < 1:
            raise PartitionError(f"passes={passes!r} must be a positive integer")

    def _alpha_gamma(self, graph) -> tuple[float, float]:
        return 0.0, 1.0

    def _partition(self, graph, train_mask):
        n, p = graph.num_nodes, self.num_parts
        capacity = max(1, math.ceil(float(self.method_params["slack"]) * n / p - 1e-9))
        out_indptr, out_dst, _ = transpose_csr(graph.indptr, graph.indices, n, edge_ids=False)
        order = np.random.default_rng(self.seed).permutation(n)
        alpha, gamma = self._alpha_gamma(graph)
        node_parts = np.full(n, -1, dtype=np.int32)
        _stream_nodes(graph.indptr, graph.indices, out_indptr, out_dst, order, p, capacity,
                      self._mode, alpha, gamma, int(self.method_params["passes"]), node_parts)
        return node_parts, None


class LDGPartitioner(_StreamingPartitioner):
    """Linear Deterministic Greedy streaming edge cut (Stanton & Kliot, 2012).

    Args:
        num_parts: number of parts.
        seed: seed of the random node order (default 0).
        slack: capacity factor, parts hold at most ``ceil(slack * N / P)`` nodes (default 1.0,
            i.e. near-perfect node balance).
        passes: number of streaming passes; >1 re-streams to refine (default 1).
    """

    name = "ldg"
    _mode = LDG
    defaults = {"slack": 1.0, "passes": 1}


class FennelPartitioner(_StreamingPartitioner):
    """Fennel streaming edge cut (Tsourakakis et al., 2014).

    Args:
        num_parts: number of parts.
        seed: seed of the random node order (default 0).
        gamma: exponent of the size penalty (default 1.5, as in the paper).
        alpha: penalty weight; ``None`` (default) uses ``sqrt(P) * E / N ** gamma``.
        slack: hard capacity factor ``nu``: parts hold at most ``ceil(slack * N / P)`` nodes
            (default 1.1, as in the paper).
        passes: number of streaming passes; >1 re-streams to refine (default 1).
    """

    name = "fennel"
    _mode = FENNEL
    defaults = {"gamma": 1.5, "alpha": None, "slack": 1.1, "passes": 1}

    def _check_params(self):
        super()._check_params()
        gamma = self.method_params["gamma"]
        if not isinstance(gamma, (int, float)) or not 1.0 < gamma <= 4.0:
            raise PartitionError(f"gamma={gamma!r} must be a number in (1, 4]")
        alpha = self.method_params["alpha"]
        if alpha is not None and (not isinstance(alpha, (int, float)) or alpha < 0):
            raise PartitionError(f"alpha={alpha!r} must be None or a non-negative number")

    def _alpha_gamma(self, graph):
        gamma = float(self.method_params["gamma"])
        alpha = self.method_params["alpha"]
        if alpha is None:
            alpha = math.sqrt(self.num_parts) * graph.num_edges / graph.num_nodes ** gamma
        return float(alpha), gamma
