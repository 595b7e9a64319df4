"""Reading one array of a (compressed) ``.npz`` chunk by chunk, converting as it goes.

``np.load(...)[key]`` decompresses a member into an array of its stored dtype; turning a
float16 feature matrix into float32 afterwards needs both at once (ogbn-papers100M: 28 GB +
57 GB). :func:`read_npz_array` instead streams the member's bytes and casts each chunk into the
preallocated result, so the peak is the result plus one chunk. Archive damage (truncation, bad
CRC, a foreign header) is a one-line :class:`DataError` naming the file and the array.
"""

from __future__ import annotations

import math
import threading
import zipfile
import zlib
from pathlib import Path

import numpy as np

from gnnscale.data.background import stop_if_cancelled
from gnnscale.errors import DataError

CHUNK_BYTES = 64 << 20


def _open_member(archive: zipfile.ZipFile, path: Path, key: str):
    names = archive.namelist()
    if f"{key}.npy" not in names:
        found = ", ".join(n[:-4] if n.endswith(".npy") else n for n in names) or "none"
        raise DataError(f"{path} has no array {key!r} (it has: {found})")
    try:
        return archive.open(f"{key}.npy")
    except (OSError, zipfile.BadZipFile, NotImplementedError, RuntimeError) as exc:
        raise DataError(f"{path}: array {key!r} cannot be opened ({exc})") from None


# numpy parses a .npy header with ast.literal_eval, and CPython 3.11's AST conversion keeps
# its recursion depth in state shared by all threads: two threads parsing headers at once (a
# feature read in the background beside the edge read) can fail with "SystemError: AST
# constructor recursion depth mismatch". Headers are tiny; parse one at a time.
_HEADER_LOCK = threading.Lock()


def _read_header(member, path: Path, key: str):
    with _HEADER_LOCK:
        return _parse_header(member, path, key)


def _parse_header(member, path: Path, key: str):
    fmt = np.lib.format
    try:
        version = fmt.read_magic(member)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(member)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(member)
        else:  # (3, 0): utf-8 field names; numpy has no public reader for it
            shape, fortran, dtype = fmt._read_array_header(member, version)
    except (ValueError, OSError, EOFError, zlib.error, zipfile.BadZipFile, SyntaxError) as exc:
        raise DataError(f"{path}: array {key!r} has no readable .npy header ({exc})") from None
    if dtype.hasobject or dtype.kind not in "biuf":
        raise DataError(f"{path}: array {key!r} has dtype {dtype}; numbers are expected")
    return tuple(int(n) for n in shape), bool(fortran), dtype


def npz_array_header(path, key: str) -> tuple[tuple[int, ...], np.dtype]:
    """``(shape, dtype)`` of array ``key`` in ``path`` without reading its data."""
    path = Path(path)
    with _archive(path) as archive, _open_member(archive, path, key) as member:
        shape, _, dtype = _read_header(member, path, key)
    return shape, dtype


def read_npz_array(path, key: str, dtype=None, *, chunk_bytes: int | None = None,
                   cancel=None) -> np.ndarray:
    """Array ``key`` of the ``.npz`` at ``path``, cast to ``dtype`` chunk by chunk.

    ``dtype=None`` keeps the stored dtype. The result has the stored shape, C order (a
    Fortran-ordered member is returned as a transposed view of its data). ``cancel``: a
    ``threading.Event``; once set, the read stops at the next chunk with
    :class:`gnnscale.data.background.Cancelled`.
    """
    path = Path(path)
    with _archive(path) as archive, _open_member(archive, path, key) as member:
        shape, fortran, stored = _read_header(member, path, key)
        target = stored if dtype is None else np.dtype(dtype)
        count = math.prod(shape)
        try:
            out = np.empty(count, dtype=target)
        except (MemoryError, ValueError):
            raise DataError(f"{path}: array {key!r} of shape {shape} does not fit in "
                            "memory") from None
        step = max(1, (chunk_bytes or CHUNK_BYTES) // max(stored.itemsize, 1))
        try:
            for start in range(0, count, step):
                stop_if_cancelled(cancel, f"{path} {key}")
                size = min(step, count - start)
                data = member.read(size * stored.itemsize)
                if len(data) != size * stored.itemsize:
                    got = start + len(data) // stored.itemsize
                    raise DataError(f"{path}: array {key!r} is truncated ({got} of {count} "
                                    "values)")
                out[start:start + size] = np.frombuffer(data, dtype=stored)
            member.read()  # to the end: zipfile checks the CRC there
        except (OSError, EOFError, zlib.error, zipfile.BadZipFile) as exc:
            raise DataError(f"{path}: array {key!r} is unreadable ({type(exc).__name__}: "
                            f"{exc}); the file may be truncated or corrupt") from None
    return out.reshape(shape[::-1]).T if fortran else out.reshape(shape)


class _archive:
    """``zipfile.ZipFile(path)`` whose opening failures are DataErrors."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> zipfile.ZipFile:
        try:
            self.zip = zipfile.ZipFile(self.path)
        except FileNotFoundError:
            raise DataError(f"file {self.path} does not exist") from None
        except (OSError, zipfile.BadZipFile, ValueError, EOFError) as exc:
            raise DataError(f"{self.path} is not a readable .npz (zip) file "
                            f"({type(exc).__name__}: {exc})") from None
        return self.zip

    def __exit__(self, *exc) -> None:
        self.zip.close()
