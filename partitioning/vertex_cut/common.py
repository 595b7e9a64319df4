"""Shared machinery of the streaming vertex cuts: replica bitsets, least-loaded tracking, masters.

Each node's replica set ``A(v)`` (the parts holding at least one of its edges) is a row of
``ceil(P / 64)`` uint64 words, so memory is ``N * ceil(P / 64) * 8`` bytes and set operations
are word-wise.

Master choice (documented contract of ``Partition.node_parts`` for a vertex cut), parameter
``master`` of the vertex-cut partitioners: ``"most_edges"`` (default) makes a node's master the
replica holding most of its edges (in plus out), ties to the lowest part id; ``"balanced"`` picks
the replica with the fewest masters so far (see :func:`choose_masters`). Nodes with no edges are
placed, in a seeded random order, on the part with the fewest masters so far.
"""

from __future__ import annotations

from abc import abstractmethod

import numba
import numpy as np

from ..base import Partitioner
from ..csr_ops import csr_destinations, transpose_csr
from ..errors import PartitionError


def num_words(num_parts: int) -> int:
    """uint64 words per replica-set row."""
    return (num_parts + 63) // 64


@numba.njit(cache=True, inline="always")
def has_part(bits, v, p):
    return (bits[v, p >> 6] >> np.uint64(p & 63)) & np.uint64(1)


@numba.njit(cache=True, inline="always")
def add_part(bits, v, p):
    bits[v, p >> 6] |= np.uint64(1) << np.uint64(p & 63)


@numba.njit(cache=True, inline="always")
def is_empty(bits, v):
    for w in range(bits.shape[1]):
        if bits[v, w] != 0:
            return False
    return True


# De Bruijn table: index of the single set bit of a uint64 in O(1) (numba has no ctz intrinsic).
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_INDEX = np.zeros(64, dtype=np.int64)
for _i in range(64):
    _DEBRUIJN_INDEX[((1 << _i) * 0x03F79D71B4CB0A89 & (2**64 - 1)) >> 58] = _i

ANY, BOTH, ONLY_FIRST = 0, 1, 2  # which set: A(u), A(u) & A(v), A(u) & ~A(v)


@numba.njit(cache=True, inline="always")
def _masked_word(bits, u, v, w, mode):
    if mode == ANY:
        return bits[u, w]
    if mode == BOTH:
        return bits[u, w] & bits[v, w]
    return bits[u, w] & ~bits[v, w]


@numba.njit(cache=True)
def least_loaded_in(bits, u, v, mode, loads, num_parts, lightest):
    """Least loaded part of the set selected by ``mode`` (see ``ANY``, ``BOTH``,
    ``ONLY_FIRST``); -1 if the set is empty.

    ``lightest`` is a globally least loaded part: when it is in the set it is the answer at once
    (hubs are replicated almost everywhere, so this saves scanning their sets). Otherwise the
    set's parts are visited in O(popcount) and ties go to the lowest part id.
    """
    w = lightest >> 6
    if (_masked_word(bits, u, v, w, mode) >> np.uint64(lightest & 63)) & np.uint64(1):
        return lightest
    best = -1
    for w in range(bits.shape[1]):
        word = _masked_word(bits, u, v, w, mode)
        while word != 0:
            low = word & (~word + np.uint64(1))
            p = w * 64 + _DEBRUIJN_INDEX[(low * _DEBRUIJN) >> np.uint64(58)]
            if p < num_parts and (best < 0 or loads[p] < loads[best]):
                best = p
            word ^= low
    return best


@numba.njit(cache=True)
def new_load_tracker(num_parts):
    """State ``[min_load, parts_at_min, cursor]`` for loads that start at zero."""
    return np.array([0, num_parts, 0], dtype=np.int64)


@numba.njit(cache=True)
def least_loaded(loads, tracker, num_parts):
    """A part with the minimum load, scanning cyclically from the last answer.

    Parts skipped are above the minimum and stay there until the minimum rises, so the cursor
    goes round at most once per minimum level: amortised O(1) per call (O(E) in all).
    """
    q = tracker[2]
    while loads[q] != tracker[0]:
        q = (q + 1) % num_parts
    tracker[2] = q
    return q


@numba.njit(cache=True)
def add_load(loads, tracker, p, num_parts):
    """``loads[p] += 1`` keeping the tracker's minimum exact (O(P) only when the minimum rises)."""
    if loads[p] == tracker[0]:
        tracker[1] -= 1
    loads[p] += 1
    if tracker[1] == 0:
        tracker[0] += 1
        count = 0
        for q in range(num_parts):
            if loads[q] == tracker[0]:
                count += 1
        tracker[1] = count



@numba.njit(cache=True, inline="always")
def place_edge(bits, loads, tracker, edge_parts, e, u, v, p, num_parts):
    """Edge ``e = u -> v`` goes to part ``p``: both endpoints get a replica there, ``p``'s load
    grows by one."""
    add_part(bits, u, p)
    add_part(bits, v, p)
    add_load(loads, tracker, p, num_parts)
    edge_parts[e] = p

MASTER_RULES = ("most_edges", "balanced")


def check_master(rule) -> None:
    """Refuse an unknown master rule."""
    if rule not in MASTER_RULES:
        raise PartitionError(f"master={rule!r} must be one of {MASTER_RULES}")


@numba.njit(cache=True)
def _better(p, best, counts, mastered, balanced):
    if best < 0:
        return True
    if balanced and mastered[p] != mastered[best]:
        return mastered[p] < mastered[best]
    if counts[p] != counts[best]:
        return counts[p] > counts[best]
    return p < best


@numba.njit(cache=True)
def _masters(indptr, indices, out_indptr, out_eid, edge_parts, num_parts, order, balanced,
             masters):
    counts = np.zeros(num_parts, dtype=np.int64)
    mastered = np.zeros(num_parts, dtype=np.int64)
    for v in order:
        for j in range(indptr[v], indptr[v + 1]):
            counts[edge_parts[j]] += 1
        for j in range(out_indptr[v], out_indptr[v + 1]):
            counts[edge_parts[out_eid[j]]] += 1
        best = -1
        for j in range(indptr[v], indptr[v + 1]):
            if _better(edge_parts[j], best, counts, mastered, balanced):
                best = edge_parts[j]
        for j in range(out_indptr[v], out_indptr[v + 1]):
            if _better(edge_parts[out_eid[j]], best, counts, mastered, balanced):
                best = edge_parts[out_eid[j]]
        for j in range(indptr[v], indptr[v + 1]):
            counts[edge_parts[j]] = 0
        for j in range(out_indptr[v], out_indptr[v + 1]):
            counts[edge_parts[out_eid[j]]] = 0
        if best >= 0:
            masters[v] = best
            mastered[best] += 1
    for v in order:  # nodes without edges: fill the parts with the fewest masters
        if masters[v] < 0:
            best = 0
            for q in range(1, num_parts):
                if mastered[q] < mastered[best]:
                    best = q
            masters[v] = best
            mastered[best] += 1


def choose_masters(graph, edge_parts: np.ndarray, num_parts: int, seed: int,
                   rule: str = "most_edges", out_csr=None) -> np.ndarray:
    """int32 ``[N]`` master part of every node.

    ``rule="most_edges"``: the replica holding most of the node's edges (ties: lowest part).
    ``rule="balanced"``: nodes in a seeded random order each take the replica with the fewest
    masters so far (ties: most edges, then lowest part), which evens out owned nodes (features,
    labels, loss terms) at the cost of some locality.
    Nodes without edges go, in a seeded random order, to the part with the fewest masters.
    """
    if out_csr is None:
        out_csr = transpose_csr(graph.indptr, graph.indices, graph.num_nodes)
    out_indptr, _, out_eid = out_csr
    order = np.random.default_rng([seed, 1]).permutation(graph.num_nodes)
    masters = np.full(graph.num_nodes, -1, dtype=np.int32)
    _masters(graph.indptr, graph.indices, out_indptr, out_eid, edge_parts, num_parts, order,
             rule == "balanced", masters)
    return masters


def degrees(graph) -> np.ndarray:
    """int64 ``[N]`` total degree (in + out)."""
    return graph.in_degree() + graph.out_degree()



class StreamingVertexCut(Partitioner):
    """The frame of a streaming vertex cut; subclasses place the edges (:meth:`_assign`).

    Edges stream in a seeded random order (a sorted edge list would pour whole components into
    one part); masters then follow the ``master`` parameter (:func:`choose_masters`).
    """

    kind = "vertex_cut"

    def _check_params(self):
        check_master(self.method_params["master"])

    @abstractmethod
    def _assign(self, graph, src, dst, order, bits, edge_parts) -> None:
        """Place edge ``order[i]`` (``src`` the CSR's ``indices``, ``dst`` the destinations),
        in that order, into ``edge_parts`` (int32), keeping the replica sets ``bits`` (rows of
        :func:`num_words` uint64 words) up to date."""

    def _partition(self, graph, train_mask):
        order = np.random.default_rng(self.seed).permutation(graph.num_edges)
        dst = csr_destinations(graph.indptr, graph.num_edges)
        bits = np.zeros((graph.num_nodes, num_words(self.num_parts)), dtype=np.uint64)
        edge_parts = np.empty(graph.num_edges, dtype=np.int32)
        self._assign(graph, graph.indices, dst, order, bits, edge_parts)
        del bits, dst, order  # before the masters' transpose: peak memory
        out_csr = transpose_csr(graph.indptr, graph.indices, graph.num_nodes)
        return choose_masters(graph, edge_parts, self.num_parts, self.seed,
                              self.method_params["master"], out_csr), edge_parts
