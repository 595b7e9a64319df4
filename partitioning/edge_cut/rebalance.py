"""Greedy multi-constraint rebalancing of an edge cut (used after METIS).

pymetis passes a single vertex-weight constraint to METIS (its multi-constraint input is not
usable: the number of constraints is not forwarded reliably), so several balance targets (nodes,
edges, training nodes) are combined into one weight for METIS and then enforced here: nodes of a
part that is over its limit on some constraint move to the feasible part holding most of their
neighbours (boundary moves first, then any part with room), which keeps the cut increase small.
"""

from __future__ import annotations

import numba
import numpy as np


def balance_limits(weights: np.ndarray, num_parts: int, imbalance: float) -> np.ndarray:
    """float64 ``[C]``: per-constraint load limit ``max(total/P * (1+imbalance), total/P + max w)``.

    The second term keeps the limit achievable when single nodes are heavy (hubs).
    """
    total = weights.sum(axis=0)
    mean = total / num_parts
    return np.maximum(mean * (1.0 + imbalance), mean + weights.max(axis=0))


@numba.njit(cache=True)
def _excess(load, limit):
    return max(0.0, load - limit) / limit


@numba.njit(cache=True)
def _rebalance(indptr, indices, parts, weights, limits, num_parts, order, max_passes):
    # A move is taken only if it lowers the total normalised overload (sum over parts and
    # constraints of max(0, load - limit) / limit): with several tight constraints, single moves
    # that respect every limit get stuck, while this potential always decreases, so it converges.
    n, num_c = weights.shape
    loads = np.zeros((num_parts, num_c))
    for v in range(n):
        for c in range(num_c):
            loads[parts[v], c] += weights[v, c]
    conn = np.zeros(num_parts, dtype=np.int64)
    for sweep in range(max_passes):
        moved = 0
        allow_any = sweep > 0
        for v in order:
            p = parts[v]
            over = False
            for c in range(num_c):
                if weights[v, c] > 0 and loads[p, c] > limits[c]:
                    over = True
            if not over:
                continue
            gain_out = 0.0
            for c in range(num_c):
                gain_out += _excess(loads[p, c] - weights[v, c], limits[c]) \
                    - _excess(loads[p, c], limits[c])
            for j in range(indptr[v], indptr[v + 1]):
                conn[parts[indices[j]]] += 1
            best, best_conn, best_delta = -1, -1, -1e-12
            for q in range(num_parts):
                if q == p or (conn[q] == 0 and not allow_any):
                    continue
                delta = gain_out
                for c in range(num_c):
                    delta += _excess(loads[q, c] + weights[v, c], limits[c]) \
                        - _excess(loads[q, c], limits[c])
                if delta < -1e-12 and (conn[q] > best_conn
                                       or (conn[q] == best_conn and delta < best_delta)):
                    best, best_conn, best_delta = q, conn[q], delta
            for j in range(indptr[v], indptr[v + 1]):
                conn[parts[indices[j]]] = 0
            if best >= 0:
                for c in range(num_c):
                    loads[p, c] -= weights[v, c]
                    loads[best, c] += weights[v, c]
                parts[v] = best
                moved += 1
        balanced = True
        for q in range(num_parts):
            for c in range(num_c):
                if loads[q, c] > limits[c]:
                    balanced = False
        if balanced or (moved == 0 and allow_any):
            break
    return parts


def rebalance(indptr: np.ndarray, indices: np.ndarray, node_parts: np.ndarray,
              weights: np.ndarray, num_parts: int, imbalance: float, seed: int,
              max_passes: int = 20) -> np.ndarray:
    """Move nodes until every part's load is within :func:`balance_limits` on every constraint.

    Args:
        indptr, indices: symmetric adjacency (CSR) used to prefer parts holding neighbours.
        node_parts: int ``[N]`` initial assignment (not modified).
        weights: float ``[N, C]`` per-node load on each constraint (non-negative).
        num_parts: ``P``.
        imbalance: allowed relative excess over the mean load (0.03 = 3%).
        seed: seeds the order in which nodes are visited.
        max_passes: sweeps over the nodes; best effort if balance is still not reached.
    Returns: a new int32 ``[N]`` assignment.
    """
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    limits = balance_limits(weights, num_parts, imbalance)
    order = np.random.default_rng(seed).permutation(node_parts.size)
    parts = node_parts.astype(np.int64).copy()
    parts = _rebalance(indptr, indices, parts, weights, limits, num_parts, order, max_passes)
    return parts.astype(np.int32)
