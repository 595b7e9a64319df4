"""Write a graph as a ParHIP binary file (the format KaMinPar and KaHIP read), in row blocks.

Layout (little-endian, as ``kaminpar-io/parhip_parser.cc`` reads it):

* header: three uint64 words ``version``, ``n``, ``m`` (``m`` counts adjacency entries, i.e.
  twice the undirected edges). ``version`` is a bit field where a *set* bit means "absent /
  32-bit": bit 0 no edge weights, bit 1 no node weights, bit 2 32-bit edge offsets, bit 3
  32-bit node ids, bit 4 32-bit node weights, bit 5 32-bit edge weights;
* ``n + 1`` edge offsets, in *bytes from the start of the file* (the first one is where the
  adjacency section begins);
* ``m`` neighbour ids;
* ``n`` node weights, when present.

The file holds the undirected adjacency: for every node the union of its in- and out-neighbours
without itself and without repeats. It is written from the CSR by destination in blocks of rows:
besides the input arrays (which may be memory-mapped) the writer holds the graph's transpose
(``E`` ids, 32-bit when ``N < 2**31``), a few ``N``-sized arrays and one bounded block buffer.
"""

from __future__ import annotations

import numba
import numpy as np

from ..csr_ops import transpose_csr
from ..errors import PartitionError
from ..graph import CSRGraph

__all__ = ["parhip_version", "write_parhip", "read_parhip"]

HEADER_BYTES = 24
BLOCK_ENTRIES = 1 << 22  # adjacency entries buffered before a write (16-32 MiB)


def parhip_version(*, node_weights: bool, wide_offsets: bool, wide_ids: bool,
                   wide_weights: bool) -> int:
    """The header's version word for a file without edge weights."""
    flags = 1                                    # bit 0: no edge weights
    flags |= 0 if node_weights else 1 << 1
    flags |= 0 if wide_offsets else 1 << 2
    flags |= 0 if wide_ids else 1 << 3
    flags |= 0 if wide_weights else 1 << 4
    return flags | 1 << 5                        # bit 5: (absent) edge weights, 32-bit


@numba.njit(cache=True)
def _append_new(neighbours, lo, hi, v, mark, buf, k):
    """Append ``neighbours[lo:hi]`` to ``buf`` from ``k``, skipping ``v`` and nodes marked
    ``v`` (seen already in this row); return the new ``k``."""
    for j in range(lo, hi):
        u = neighbours[j]
        if u != v and mark[u] != v:
            mark[u] = v
            buf[k] = u
            k += 1
    return k


@numba.njit(cache=True)
def _undirected_rows(indptr, indices, out_indptr, out_dst, start, stop, mark, buf, degrees):
    """Fill ``buf`` with the deduplicated, loop-free neighbours of rows ``start..`` until the
    next row would overflow it; return ``(next row, entries written)``."""
    k = 0
    v = start
    while v < stop:
        need = indptr[v + 1] - indptr[v] + out_indptr[v + 1] - out_indptr[v]
        if k + need > buf.shape[0]:
            break
        first = k
        k = _append_new(indices, indptr[v], indptr[v + 1], v, mark, buf, k)
        k = _append_new(out_dst, out_indptr[v], out_indptr[v + 1], v, mark, buf, k)
        degrees[v] = k - first
        v += 1
    return v, k


def write_parhip(path, graph: CSRGraph, node_weights: np.ndarray | None = None, *,
                 wide: bool = True, block_entries: int = BLOCK_ENTRIES) -> int:
    """Write ``graph``'s undirected, loop-free, duplicate-free adjacency to ``path``.

    Args:
        path: file to create (overwritten).
        graph: CSR by destination; the direction of its edges is dropped.
        node_weights: optional integer ``[N]`` weights, each >= 0.
        wide: the reader is a 64-bit build (KaMinPar's ``__64bit__``): 64-bit edge offsets and
            node weights; otherwise everything must fit 32 bits.
        block_entries: adjacency entries buffered per write (at least the largest degree is
            used).
    Returns: ``m``, the number of adjacency entries written.
    Raises: PartitionError when a 32-bit reader cannot hold the graph or the weights; OSError
    from the file system (a full disk) propagates.
    """
    n = graph.num_nodes
    wide_ids = n > np.iinfo(np.uint32).max
    if wide_ids and not wide:
        raise PartitionError(f"{n} nodes need 64-bit node ids; this KaMinPar build has 32-bit")
    id_dtype = np.uint64 if wide_ids else np.uint32
    id_bytes = np.dtype(id_dtype).itemsize
    weight_dtype = np.int64 if wide else np.int32
    if node_weights is not None:
        node_weights = np.asarray(node_weights)
        if node_weights.shape != (n,):
            raise PartitionError(f"node_weights has shape {node_weights.shape}, expected ({n},)")
        if n and (node_weights.min() < 0 or node_weights.max() > np.iinfo(weight_dtype).max):
            raise PartitionError(
                f"node weights must lie in [0, {np.iinfo(weight_dtype).max}], got "
                f"[{node_weights.min()}, {node_weights.max()}]")
    out_indptr, out_dst, _ = transpose_csr(graph.indptr, graph.indices, n, edge_ids=False,
                                           dst_dtype=np.int32 if n < 2**31 else np.int64)
    bound = np.diff(graph.indptr) + np.diff(out_indptr)  # degree before removing repeats
    buf = np.empty(max(int(block_entries), int(bound.max(initial=0))), dtype=id_dtype)
    del bound
    mark = np.full(n, -1, dtype=np.int64)
    degrees = np.zeros(n, dtype=np.int64)
    edges_at = HEADER_BYTES + (n + 1) * 8 if wide else HEADER_BYTES + (n + 1) * 4
    with open(path, "wb") as fh:
        fh.seek(edges_at)
        row = 0
        while row < n:
            row, k = _undirected_rows(graph.indptr, graph.indices, out_indptr, out_dst, row, n,
                                      mark, buf, degrees)
            fh.write(memoryview(buf[:k]))
        del out_indptr, out_dst, mark, buf
        m = int(degrees.sum())
        if node_weights is not None:
            fh.write(memoryview(np.ascontiguousarray(node_weights, dtype=weight_dtype)))
        offsets = np.empty(n + 1, dtype=np.int64)
        offsets[0] = 0
        np.cumsum(degrees, out=offsets[1:])
        offsets *= id_bytes
        offsets += edges_at
        if not wide and offsets[-1] > np.iinfo(np.uint32).max:
            raise PartitionError(
                f"{m} adjacency entries exceed 32-bit file offsets; this KaMinPar build has "
                "32-bit edge ids")
        version = parhip_version(node_weights=node_weights is not None, wide_offsets=wide,
                                 wide_ids=wide_ids, wide_weights=wide)
        fh.seek(0)
        fh.write(memoryview(np.array([version, n, m], dtype=np.uint64)))
        fh.write(memoryview(offsets.astype(np.uint64 if wide else np.uint32)))
    return m


def read_parhip(path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Memory-map a ParHIP file: ``(indptr int64 [N+1], neighbours [M], node_weights or None)``.

    ``neighbours`` stays a read-only map of the file (no copy); the file must outlive it.
    """
    header = np.fromfile(path, dtype=np.uint64, count=3)
    if header.size != 3:
        raise PartitionError(f"{path} is too short for a ParHIP header")
    version, n, m = (int(x) for x in header)
    wide_offsets, wide_ids = not version & 4, not version & 8
    offset_dtype = np.uint64 if wide_offsets else np.uint32
    id_dtype = np.uint64 if wide_ids else np.uint32
    id_bytes = np.dtype(id_dtype).itemsize
    offsets = np.fromfile(path, dtype=offset_dtype, count=n + 1, offset=HEADER_BYTES)
    edges_at = HEADER_BYTES + (n + 1) * np.dtype(offset_dtype).itemsize
    indptr = (offsets.astype(np.int64) - edges_at) // id_bytes
    neighbours = np.memmap(path, dtype=id_dtype, mode="r", offset=edges_at, shape=(m,)) \
        if m else np.zeros(0, dtype=id_dtype)
    weights = None
    if not version & 2:
        weight_dtype = np.int32 if version & 16 else np.int64
        weights = np.fromfile(path, dtype=weight_dtype, count=n, offset=edges_at + m * id_bytes)
    return indptr, neighbours, weights
