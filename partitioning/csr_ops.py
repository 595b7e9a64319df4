"""Compiled helpers on CSR arrays shared by the streaming partitioners."""

from __future__ import annotations

import numba
import numpy as np


# Output arrays are allocated in Python, not inside compiled code, so that tracemalloc (and
# with it Partition.peak_memory_bytes) sees them.


def transpose_csr(indptr, indices, num_nodes, *, edge_ids: bool = True, dst_dtype=np.int64):
    """CSR by source from CSR by destination, in O(N + E) (a counting sort).

    Returns ``(out_indptr, out_dst, out_eid)``: row ``u`` lists the destinations of edges
    ``u -> v`` (ascending ``v``) and ``out_eid`` the position of each such edge in ``indices``
    (``None`` with ``edge_ids=False``, which saves ``8 E`` bytes). ``out_dst`` has
    ``dst_dtype`` (int32 when ``num_nodes < 2**31`` saves another ``4 E`` bytes).
    """
    out_indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    out_dst = np.empty(indices.shape[0], dtype=dst_dtype)
    out_eid = np.empty(indices.shape[0] if edge_ids else 0, dtype=np.int64)
    _transpose(indptr, indices, num_nodes, out_indptr, out_dst, out_eid, edge_ids)
    return out_indptr, out_dst, (out_eid if edge_ids else None)


@numba.njit(cache=True)
def _transpose(indptr, indices, num_nodes, out_indptr, out_dst, out_eid, edge_ids):
    num_edges = indices.shape[0]
    for j in range(num_edges):
        out_indptr[indices[j] + 1] += 1
    for u in range(num_nodes):
        out_indptr[u + 1] += out_indptr[u]
    cursor = out_indptr[:-1].copy()
    for v in range(num_nodes):
        for j in range(indptr[v], indptr[v + 1]):
            u = indices[j]
            out_dst[cursor[u]] = v
            if edge_ids:
                out_eid[cursor[u]] = j
            cursor[u] += 1


INT32_SCRATCH_MAX_NODES = 2**31 - 1  # ids up to this count sort as int32


def simple_csr_from_edges(src, dst, num_nodes: int, *, symmetrize: bool,
                          remove_self_loops: bool = False):
    """CSR by destination of the edges ``src -> dst`` (and ``dst -> src`` with ``symmetrize``),
    each row sorted by source with repeats dropped, in ``O(N + E)`` plus one sort per row.

    A counting sort by destination, then each row is sorted and compacted, all inside the one
    int64 result array (``E`` or ``2 E`` entries, trimmed in place at the end): no ``E``-sized
    keys or temporaries, and several times faster than one global sort of ``dst * N + src``
    keys. With fewer than ``2**31`` nodes the sort runs on int32 ids kept in the upper half of
    the result's bytes (half the memory traffic of the scatter and the row sorts); the
    compaction writes each row's int64 ids below the int32 ids not yet read. Ids must already
    be checked to lie in ``[0, num_nodes)``. Returns ``(indptr, indices)``, both int64.
    """
    src = np.ascontiguousarray(src, dtype=np.int64)
    dst = np.ascontiguousarray(dst, dtype=np.int64)
    indptr = np.zeros(int(num_nodes) + 1, dtype=np.int64)
    capacity = src.shape[0] * (2 if symmetrize else 1)
    indices = np.empty(capacity, dtype=np.int64)
    # int32 scratch: int32 slot k sits at byte 4 * capacity + 4 k, and int64 entry w <= k is
    # written at bytes [8 w, 8 w + 8), below every slot not yet read (2 w + 1 <= capacity + k).
    scratch = indices.view(np.int32)[capacity:] if num_nodes <= INT32_SCRATCH_MAX_NODES \
        else indices
    _count_rows(src, dst, bool(symmetrize), bool(remove_self_loops), indptr)
    _scatter(src, dst, bool(symmetrize), bool(remove_self_loops), indptr, scratch)
    count = _sort_compact_rows(indptr, scratch, indices)
    try:
        indices.resize(count, refcheck=False)
    except ValueError:  # pragma: no cover - only when something else views the buffer
        indices = indices[:count].copy()
    return indptr, indices


@numba.njit(cache=True, nogil=True)  # nogil: a loader builds the CSR while another file parses
def _count_rows(src, dst, symmetrize, remove_self_loops, indptr):
    """``indptr`` (zeros on entry) becomes the row offsets of the scatter."""
    for i in range(src.shape[0]):
        if remove_self_loops and src[i] == dst[i]:
            continue
        indptr[dst[i] + 1] += 1
        if symmetrize:
            indptr[src[i] + 1] += 1
    for v in range(indptr.shape[0] - 1):
        indptr[v + 1] += indptr[v]


@numba.njit(cache=True, nogil=True)
def _scatter(src, dst, symmetrize, remove_self_loops, indptr, out):
    cursor = indptr[:-1].copy()
    for i in range(src.shape[0]):
        u, v = src[i], dst[i]
        if remove_self_loops and u == v:
            continue
        out[cursor[v]] = u
        cursor[v] += 1
        if symmetrize:
            out[cursor[u]] = v
            cursor[u] += 1


@numba.njit(cache=True, nogil=True)
def _sort_compact_rows(indptr, scratch, out):
    """Sort each row of ``scratch``, drop repeats, write it to ``out`` from the last write
    position (never past a row not yet read); ``indptr`` becomes the compacted offsets."""
    num_nodes = indptr.shape[0] - 1
    write = 0
    start = indptr[0]
    for v in range(num_nodes):
        end = indptr[v + 1]
        scratch[start:end].sort()
        indptr[v] = write
        previous = -1
        for k in range(start, end):
            value = np.int64(scratch[k])  # read before the write below may cover it
            if value != previous:
                out[write] = value
                write += 1
                previous = value
        start = end
    indptr[num_nodes] = write
    return write


def is_sorted_simple_rows(indptr, indices) -> bool:
    """Whether every row is strictly increasing (sorted, no duplicates) and holds no self loop."""
    return bool(_sorted_simple(indptr, indices))


@numba.njit(cache=True)
def _sorted_simple(indptr, indices):
    for v in range(indptr.shape[0] - 1):
        previous = -1
        for j in range(indptr[v], indptr[v + 1]):
            u = indices[j]
            if u <= previous or u == v:
                return False
            previous = u
    return True


def csr_destinations(indptr, num_edges):
    """int64 ``[E]``: destination node of every edge of a CSR-by-destination graph."""
    return np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
