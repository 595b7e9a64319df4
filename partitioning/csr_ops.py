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
