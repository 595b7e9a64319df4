"""Safe ``.npz`` reading shared by the npz-based loaders (no pickled objects, clear errors)."""

from __future__ import annotations

import contextlib
import zipfile
from pathlib import Path

import numpy as np

from gnnscale.errors import DataError


class _Arrays:
    """Lazy, error-wrapping view of an open ``NpzFile``: ``arrays[key]`` reads one array."""

    def __init__(self, npz, path: Path):
        self._npz, self.path = npz, path
        self.files = list(npz.files)

    def __contains__(self, key) -> bool:
        return key in self.files

    def __getitem__(self, key) -> np.ndarray:
        try:
            return self._npz[key]
        except KeyError:
            raise DataError(f"{self.path} has no array {key!r} (it has: "
                            f"{', '.join(self.files) or 'none'})") from None
        except Exception as exc:  # corrupt member: zlib, CRC, header or pickle refusal
            raise DataError(f"{self.path}: array {key!r} is unreadable ({type(exc).__name__}: "
                            f"{exc}); the file may be truncated or corrupt") from None


@contextlib.contextmanager
def open_npz(path: Path):
    """Open ``path`` with ``allow_pickle=False``; any failure becomes a :class:`DataError`."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"file {path} does not exist")
    try:
        npz = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise DataError(f"{path} is not a readable .npz file ({type(exc).__name__}: {exc})") \
            from None
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise DataError(f"{path} holds a single .npy array, not an .npz archive")
    try:
        yield _Arrays(npz, path)
    finally:
        npz.close()


def npz_keys(path: Path) -> list[str] | None:
    """Array names in ``path`` if it is a zip archive, else ``None`` (used to sniff formats)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return [n[:-4] if n.endswith(".npy") else n for n in archive.namelist()]
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return None


def require(arrays: _Arrays, keys, path: Path, layout: str) -> _Arrays:
    """Raise :class:`DataError` naming the first of ``keys`` missing from the archive."""
    missing = [k for k in keys if k not in arrays]
    if missing:
        raise DataError(f"{path} lacks {', '.join(missing)} needed by the {layout} npz layout "
                        f"(it has: {', '.join(arrays.files) or 'nothing'})")
    return arrays
