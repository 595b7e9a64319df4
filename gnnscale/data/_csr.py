"""CSR construction for :mod:`gnnscale.data` (CSR by destination).

Rows are destinations: row ``v`` lists the sources ``u`` of the edges ``u -> v``. General edge
lists go through ``partitioning.graph.CSRGraph``; the key-based path below is for very large
generated graphs (R-MAT), where it sorts in place to keep the peak memory near two key arrays.
"""

from __future__ import annotations

import numpy as np

from gnnscale.errors import DataError


def csr_by_destination(src, dst, num_nodes: int, *, symmetrize: bool = False,
                       remove_duplicates: bool = False, remove_self_loops: bool = False):
    """Build ``(indptr, indices)`` (int64) of the CSR by destination of the edges ``src -> dst``.

    :meth:`partitioning.graph.CSRGraph.from_edge_index` with the same flags and order: stable
    by destination; sorted by source within a row when duplicates are removed (a compiled
    counting sort, :func:`partitioning.csr_ops.simple_csr_from_edges`); ``symmetrize`` adds
    every reverse edge and removes duplicates. Removing duplicates takes integer ids only. Bad
    ids raise :class:`DataError`.
    """
    from partitioning.errors import PartitionError
    from partitioning.graph import CSRGraph

    src = np.asarray(src).ravel()
    dst = np.asarray(dst).ravel()
    if (symmetrize or remove_duplicates) and src.size and not (
            np.issubdtype(src.dtype, np.integer) and np.issubdtype(dst.dtype, np.integer)):
        raise DataError(f"bad edge list: node ids must be integers, got {src.dtype}/{dst.dtype}")
    try:
        graph = CSRGraph.from_edge_index(src, dst, int(num_nodes), symmetrize=symmetrize,
                                         remove_duplicates=remove_duplicates,
                                         remove_self_loops=remove_self_loops)
    except PartitionError as exc:
        raise DataError(f"bad edge list: {exc}; node ids must be 0-based and below "
                        f"num_nodes={num_nodes}") from None
    return graph.indptr, graph.indices


def csr_from_sorted_keys(keys: np.ndarray, num_nodes: int, *, unique: bool = True):
    """CSR from sorted int64 keys ``dst * num_nodes + src``; drops repeats unless ``unique``.

    ``keys`` is consumed: it is de-duplicated and turned into the sources in place, so very
    large edge sets (R-MAT) need little more than the key array itself.
    """
    if not unique:
        keys = dedupe_sorted_in_place(keys)
    # Row v starts at the first key >= v * N (keys are sorted), no per-edge temporaries.
    indptr = np.searchsorted(keys, np.arange(num_nodes + 1, dtype=np.int64) * num_nodes)
    indptr = indptr.astype(np.int64, copy=False)
    if num_nodes:
        np.remainder(keys, num_nodes, out=keys)  # keys now hold the sources, in CSR order
    return indptr, keys


def dedupe_sorted_in_place(keys: np.ndarray, chunk: int = 1 << 22) -> np.ndarray:
    """Drop repeats from sorted ``keys`` by compacting in place, chunk by chunk.

    Returns ``keys[:count]`` (a view, the tail freed by ``resize`` when possible), using
    ``O(chunk)`` extra memory instead of a full copy.
    """
    count, previous = 0, None
    for start in range(0, keys.size, chunk):
        block = keys[start:start + chunk]
        keep = np.empty(block.size, dtype=bool)
        keep[0] = previous is None or block[0] != previous
        np.not_equal(block[1:], block[:-1], out=keep[1:])
        previous = block[-1]
        kept = block[keep]  # a copy, so writing it to the (earlier) front is safe
        keys[count:count + kept.size] = kept
        count += kept.size
    if keys.size:
        del block, keep, kept  # no views of the buffer may outlive the resize below
    try:
        keys.resize(count, refcheck=False)
        return keys
    except ValueError:  # a view or a non-owning array: hand back a trimmed view
        return keys[:count]
