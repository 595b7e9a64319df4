"""Copying rows out of a memory-mapped array without keeping the file mapped in this process.

Reading a quarter of the rows of a memory-mapped feature matrix, scattered as a partition
scatters them, touches nearly every page of the file: each touched page counts in the process's
resident memory (``RssFile``) for as long as the mapping lives, so every rank of a host appears
to hold the whole file (docs/large-graphs.md, "Four ranks in memory against one process").
The pages are the host's shared page cache, but they are mapped in every rank and count in every
rank's peak. :func:`take_rows` copies the rows window by window in file order and drops each
window's pages from this process (``madvise(MADV_DONTNEED)``, which leaves the page cache as it
is) before the next, so the mapped part stays below one window.
"""

from __future__ import annotations

import mmap

import numpy as np

#: bytes of the file copied between two releases of its pages
WINDOW_BYTES = 64 << 20


def _mapping(array: np.ndarray):
    """``(mmap object, byte offset of array[0] in it)`` of a C-contiguous memory-mapped array,
    or ``None`` when the array is not one (an in-memory array is indexed as it is)."""
    mm = getattr(array, "_mmap", None)
    if mm is None or not hasattr(mm, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
        return None
    if not array.flags.c_contiguous or array.ndim == 0:
        return None
    start = np.frombuffer(mm, dtype=np.uint8).ctypes.data
    return mm, array.ctypes.data - start


def take_rows(array, rows: np.ndarray, window_bytes: int = WINDOW_BYTES) -> np.ndarray:
    """``array[rows]`` as a new in-memory array (``rows``: int ids, ascending is fastest).

    For a memory-mapped ``array`` (``np.load(..., mmap_mode="r")``), the rows are copied in
    windows of about ``window_bytes`` of the file, and each window's pages are released from
    this process right after, so resident memory grows by the result only.
    """
    rows = np.asarray(rows, dtype=np.int64)
    found = _mapping(array) if rows.size else None
    if found is None:
        return np.asarray(array[rows])
    out = np.empty((rows.size, *array.shape[1:]), dtype=array.dtype)
    if rows.size > 1 and np.any(rows[1:] < rows[:-1]):
        order = np.argsort(rows, kind="stable")
        out[order] = take_rows(array, rows[order], window_bytes)
        return out
    rows_per_window = max(1, window_bytes // _row_bytes(array))
    done = 0
    while done < rows.size:
        first = int(rows[done])
        end = done + int(np.searchsorted(rows[done:], first + rows_per_window))
        out[done:end] = array[rows[done:end]]
        _release(array, found, first, int(rows[end - 1]) + 1)
        done = end
    return out


def read_rows(array, start: int, stop: int, dtype=None) -> np.ndarray:
    """``array[start:stop]`` (as ``dtype`` if given). A memory-mapped ``array``'s rows are
    copied into memory and their pages then released from this process (see
    :func:`take_rows`); an in-memory one is returned as a view where the dtype allows. For
    passes that read a mapped file block by block."""
    found = _mapping(array) if stop > start else None
    if found is None:
        return np.asarray(array[start:stop], dtype=dtype)
    block = np.array(array[start:stop], dtype=dtype, copy=True)
    _release(array, found, int(start), int(stop))
    return block


def _row_bytes(array) -> int:
    return max(int(array.strides[0]) if array.ndim > 1 else array.itemsize, 1)


def _release(array, found, start: int, stop: int) -> None:
    """Drop the pages of rows ``[start, stop)`` of a mapped ``array`` (``found``: its
    :func:`_mapping`) from this process; the page cache keeps them."""
    mm, offset = found
    lo = offset + start * _row_bytes(array)
    hi = min(offset + stop * _row_bytes(array), len(mm))
    lo -= lo % mmap.PAGESIZE
    if hi > lo:
        mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
