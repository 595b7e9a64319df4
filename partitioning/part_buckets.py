"""Rows of a large graph grouped by owner part in one sequential pass, spilled to disk.

Writing a store part by part gathers each part's rows from the whole graph. When the graph is
memory-mapped and larger than the page cache can keep, those gathers are random reads all over
the file, once per part (for 256 parts of a 0.5-billion-edge graph, hours of disk seeks). A
:class:`PartBuckets` reads the CSR and the feature rows once, front to back, in blocks, sorts each
block by owner part and appends every part's piece to that part's own file in a scratch folder;
each part is then one sequential read. The order inside a part is the graph's (rows ascending,
sources in CSR order), exactly what :class:`~partitioning.local_view.PartViewBuilder` gathers.
Peak memory: one block (``EDGES_PER_BLOCK`` edges, or as many feature rows in bytes).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

from .mapped_rows import read_rows

# Bytes of feature rows read per block of the node-row pass.
ROW_BYTES_PER_BLOCK = 1 << 27


class PartBuckets:
    """Per-part spill files of a graph's sources (and, on request, of node-row arrays).

    Args:
        indptr, indices: CSR by destination (``indices`` may be memory-mapped).
        node_parts: owner part of every node.
        num_parts: number of parts.
        folder: where the scratch folder is created (it is removed by :meth:`close`).
        row_blocks: the row ranges to read (``local_view.row_blocks`` of ``indptr``).
    """

    def __init__(self, indptr, indices, node_parts, num_parts: int, folder, row_blocks):
        self.num_parts = int(num_parts)
        self.node_parts = node_parts
        self.dir = Path(tempfile.mkdtemp(prefix=".part-buckets-", dir=folder))
        self._arrays = {}
        try:
            for a, b in row_blocks:
                lo, hi = int(indptr[a]), int(indptr[b])
                sources = read_rows(indices, lo, hi, dtype=np.int64)
                edge_part = np.repeat(node_parts[a:b], np.diff(indptr[a:b + 1]))
                self._append("sources", edge_part, sources)
        except BaseException:
            self.close()
            raise

    def _path(self, name: str, part: int) -> Path:
        return self.dir / f"{name}-{part:05d}.bin"

    def _append(self, name: str, owner: np.ndarray, rows: np.ndarray) -> None:
        order = np.argsort(owner, kind="stable")
        bounds = np.searchsorted(owner[order], np.arange(self.num_parts + 1))
        rows = rows[order]
        for part in np.flatnonzero(np.diff(bounds)):
            with open(self._path(name, int(part)), "ab") as fh:
                fh.write(np.ascontiguousarray(rows[bounds[part]:bounds[part + 1]]).data)

    def add_rows(self, name: str, array) -> None:
        """Spill the rows of a node array (e.g. features ``[N, F]``) by owner part, one block
        of rows at a time."""
        array_rows = array.shape[0]
        row_bytes = max(1, array.dtype.itemsize * int(np.prod(array.shape[1:], dtype=np.int64)))
        step = max(1, ROW_BYTES_PER_BLOCK // row_bytes)
        for a in range(0, array_rows, step):
            b = min(array_rows, a + step)
            self._append(name, np.asarray(self.node_parts[a:b]), read_rows(array, a, b))
        self._arrays[name] = (array.dtype, array.shape[1:])

    def sources(self, part: int) -> np.ndarray:
        """The sources of the in-edges of ``part``'s nodes, rows ascending, CSR order."""
        return self._read("sources", part, np.dtype(np.int64), ())

    def rows(self, name: str, part: int) -> np.ndarray:
        """``array[owned]`` of a spilled node array, ``owned`` ascending."""
        dtype, row_shape = self._arrays[name]
        return self._read(name, part, dtype, row_shape)

    def has(self, name: str) -> bool:
        return name in self._arrays

    def _read(self, name: str, part: int, dtype, row_shape) -> np.ndarray:
        path = self._path(name, part)
        if not path.exists():
            return np.zeros((0, *row_shape), dtype=dtype)
        return np.fromfile(path, dtype=dtype).reshape(-1, *row_shape)

    def close(self) -> None:
        """Delete the scratch folder."""
        shutil.rmtree(self.dir, ignore_errors=True)
