"""Private CSR builder for :mod:`gnnscale.data` (CSR by destination).

Kept private and small on purpose: once ``partitioning.graph.CSRGraph.from_edge_index`` exists
with the same flags, this module can delegate to it. Rows are destinations: row ``v`` lists the
sources ``u`` of the edges ``u -> v``.
"""

from __future__ import annotations

import numpy as np

from gnnscale.errors import DataError

# Keys ``dst * N + src`` must fit in int64.
_MAX_KEYED_NODES = 3_000_000_000


def csr_by_destination(src, dst, num_nodes: int, *, symmetrize: bool = False,
                       remove_duplicates: bool = False, remove_self_loops: bool = False):
    """Build ``(indptr, indices)`` (int64) of the CSR by destination of the edges ``src -> dst``.

    Without ``remove_duplicates`` or ``symmetrize`` the order of sources within a row is the
    input order (stable sort). ``symmetrize`` adds every reverse edge and removes duplicates, so
    an undirected edge listed once or twice becomes exactly two entries; rows are then sorted by
    source. Ids must already lie in ``[0, num_nodes)``; a violation raises :class:`DataError`.
    """
    src = np.asarray(src, dtype=np.int64).ravel()
    dst = np.asarray(dst, dtype=np.int64).ravel()
    num_nodes = int(num_nodes)
    if src.shape != dst.shape:
        raise DataError(f"edge sources ({src.size}) and destinations ({dst.size}) differ in length")
    if num_nodes < 0:
        raise DataError(f"num_nodes must be >= 0, got {num_nodes}")
    for label, ids in (("source", src), ("destination", dst)):
        if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
            bad = ids.min() if ids.min() < 0 else ids.max()
            raise DataError(f"edge {label} id {int(bad)} is outside [0, {num_nodes}): "
                            "node ids must be 0-based and below num_nodes")
    if remove_self_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    if symmetrize:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
        remove_duplicates = True
    if remove_duplicates:
        if num_nodes > _MAX_KEYED_NODES:
            raise DataError(f"graph with {num_nodes} nodes is too large to de-duplicate here")
        keys = dst * num_nodes + src
        del src, dst
        keys.sort()
        return csr_from_sorted_keys(keys, num_nodes, unique=False)
    order = np.argsort(dst, kind="stable")
    indices = src[order]
    counts = np.bincount(dst, minlength=num_nodes)
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return indptr, indices


def csr_from_sorted_keys(keys: np.ndarray, num_nodes: int, *, unique: bool = True):
    """CSR from sorted int64 keys ``dst * num_nodes + src``; drops repeats unless ``unique``.

    Works in place on ``keys`` where it can, so very large edge sets (R-MAT) need roughly two
    copies of the key array at the peak.
    """
    if not unique and keys.size > 1:
        keep = np.empty(keys.size, dtype=bool)
        keep[0] = True
        np.not_equal(keys[1:], keys[:-1], out=keep[1:])
        keys = keys[keep]
        del keep
    dst = keys // num_nodes
    counts = np.bincount(dst, minlength=num_nodes)
    del dst
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    np.remainder(keys, num_nodes, out=keys)  # keys now hold the sources, in CSR order
    return indptr, keys
