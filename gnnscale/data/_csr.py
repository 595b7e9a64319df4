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

    Delegates to :meth:`partitioning.graph.CSRGraph.from_edge_index` (same flags and order:
    stable by destination; sorted by source within a row when duplicates are removed;
    ``symmetrize`` adds every reverse edge and removes duplicates). Its ``PartitionError`` for
    bad ids or lengths becomes :class:`DataError`.
    """
    from partitioning.errors import PartitionError
    from partitioning.graph import CSRGraph

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
