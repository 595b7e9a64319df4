"""Folders written atomically, with a sha256 and size per file (partition stores, converted graphs).

A writer creates a temporary folder beside the target (:func:`temp_folder_beside`), writes each
file through :func:`write_synced` or :func:`write_npy` (fsynced, checksummed while written),
writes its manifest last and calls :func:`install_folder`, which renames the folder into place.
On any failure the caller removes the temporary folder, so nothing half-written ever carries
the target's name. A full disk or an unwritable folder raise :class:`OSError` for the caller to
turn into its own one-line error.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["read_manifest_file", "sha256_file", "write_synced", "write_npy", "fsync_dir", "temp_folder_beside",
           "install_folder", "npy_header"]

# Bytes hashed and written per call: bounds the temporaries of large arrays (memory-mapped input
# is copied out this much at a time).
CHUNK_BYTES = 1 << 26


def sha256_file(path) -> str:
    """Hex sha256 of a file, read in 4 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


class _HashingWriter:
    """File-like object that hashes and counts what it writes."""

    def __init__(self, fh):
        self.fh, self.digest, self.count = fh, hashlib.sha256(), 0

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        self.digest.update(view)
        self.fh.write(view)
        self.count += view.nbytes
        return view.nbytes

    def flush(self) -> None:
        self.fh.flush()


def write_synced(path, write) -> dict:
    """Create ``path`` with ``write(fileobj)``, fsync it; return ``{file, bytes, sha256}``."""
    path = Path(path)
    with open(path, "wb") as fh:
        write(fh)
        fh.flush()
        os.fsync(fh.fileno())
    return {"file": path.name, "bytes": path.stat().st_size, "sha256": sha256_file(path)}


def _write_hashed(path, write) -> dict:
    """:func:`write_synced` for sequential writers: the checksum is taken from the bytes as
    they are written (no second read of a large file)."""
    path = Path(path)
    with open(path, "wb") as fh:
        writer = _HashingWriter(fh)
        write(writer)
        fh.flush()
        os.fsync(fh.fileno())
    return {"file": path.name, "bytes": writer.count, "sha256": writer.digest.hexdigest()}


def npy_header(dtype, shape) -> dict:
    """The ``.npy`` header dict of a C-ordered array of ``dtype`` and ``shape``."""
    return {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
            "shape": tuple(int(s) for s in shape)}


def write_npy(path, array, *, dtype=None, on_bytes=None) -> dict:
    """Write ``array`` (any array-like with rows, e.g. a memory map) as ``.npy``, row blocks at a
    time, converted to ``dtype`` if given; return ``{file, bytes, sha256, dtype, shape}``.

    ``on_bytes(n)`` is called after every block (for progress bars).
    """
    dtype = np.dtype(dtype if dtype is not None else array.dtype)
    shape = tuple(int(s) for s in np.shape(array))
    row_bytes = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64)) if shape else 1
    rows_per_block = max(1, CHUNK_BYTES // max(row_bytes, 1))

    def write(fh):
        np.lib.format.write_array_header_1_0(fh, npy_header(dtype, shape))
        if not shape:
            fh.write(np.asarray(array, dtype=dtype).tobytes())
            return
        for start in range(0, shape[0], rows_per_block):
            block = np.ascontiguousarray(array[start:start + rows_per_block], dtype=dtype)
            fh.write(block)
            if on_bytes is not None:
                on_bytes(block.nbytes)

    entry = _write_hashed(path, write)
    entry.update(dtype=dtype.str, shape=list(shape))
    return entry


def fsync_dir(path) -> None:
    """fsync a folder so a rename inside it is durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_folder_beside(target) -> Path:
    """A new empty hidden folder in ``target``'s parent, named after it, readable per umask."""
    target = Path(target).absolute()
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes 0700; the result should follow the umask
    return tmp


def install_folder(tmp, target) -> None:
    """Rename ``tmp`` to ``target``; an existing ``target`` is swapped out first, then deleted."""
    tmp, target = Path(tmp), Path(target)
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.rename(target, old)
    try:
        os.rename(tmp, target)
    except OSError:
        if old is not None:
            os.rename(old, target)
        raise
    fsync_dir(target.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def read_manifest_file(path, fmt: str, version: int, error, redo: str) -> dict:
    """Read a JSON manifest and check its ``format`` and ``format_version``.

    ``error`` is the exception type to raise (each caller's own), ``redo`` the command that
    re-creates the folder (named when the version differs).
    """
    path = Path(path)
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise error(f"{path} is missing: {path.parent} is not a {fmt} folder") from None
    except (OSError, ValueError) as exc:
        raise error(f"{path} is unreadable or not valid JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != fmt:
        raise error(f"{path} is not a {fmt} manifest")
    found = manifest.get("format_version")
    if found != version:
        raise error(f"{path} has format_version {found!r}, this code reads version {version}; "
                    f"re-create it with `{redo}`")
    return manifest
