"""Output paths checked before any work starts: every command's files and folders.

:func:`check_output` refuses, with one line naming the option and the path, an output that
could not be written: a file wanted where a folder exists (or a folder where a file exists),
a path under a regular file, or a nearest existing folder that does not take a new file (a
read-only file system, ``/proc``, ``/sys``, a folder without write permission). The check
writes a probe file into that folder and removes it at once, so it holds for root too (for
whom permission bits do not count) and creates nothing: missing parent folders are left for
the writer to create.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from ..errors import UsageError

#: what an output option names: one file (written whole, e.g. through a temporary file renamed
#: over it), a folder the command creates or writes files into, or a folder written beside its
#: place and renamed into it (partition stores, converted graphs: the parent takes the writes)
KINDS = ("file", "folder", "renamed-folder")


def check_output(path, option: str, kind: str = "file") -> Path:
    """Refuse (:class:`~gnnscale.errors.UsageError`) an output ``path`` that cannot be written;
    return it as an absolute path. ``option`` names it in the message (``--metrics-out``);
    ``kind``: one of :data:`KINDS`. Creates and leaves nothing."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    shown = f"{option} {path}"
    target = Path(path).expanduser().absolute()
    if kind == "file" and target.is_dir():
        raise UsageError(f"{shown}: that is a folder; give the path of a file")
    if kind != "file" and target.exists() and not target.is_dir():
        raise UsageError(f"{shown}: that is a file, not a folder")
    start = target if kind == "folder" else target.parent
    existing = next(p for p in (start, *start.parents) if p.exists())
    if not existing.is_dir():
        raise UsageError(f"{shown}: cannot create it: {existing} is a file, not a folder")
    _probe_folder(existing, shown)
    if kind == "file" and target.exists():
        _probe_file(target, shown)
    return target


def _probe_folder(folder: Path, shown: str) -> None:
    """Create and remove a file in ``folder``: the only test that holds on read-only mounts,
    pseudo file systems and for root."""
    try:
        handle, name = tempfile.mkstemp(prefix=".gnnscale-probe-", dir=folder)
    except OSError as exc:
        raise UsageError(f"{shown}: folder {folder} does not take new files "
                         f"({exc.strerror or exc})") from None
    os.close(handle)
    os.unlink(name)


def _probe_file(target: Path, shown: str) -> None:
    """An existing regular file must open for writing (without truncating it)."""
    if not stat.S_ISREG(target.stat().st_mode):
        return  # a device such as /dev/null, or a pipe: opening it could block or act
    try:
        os.close(os.open(target, os.O_WRONLY | os.O_APPEND))
    except OSError as exc:
        raise UsageError(f"{shown}: cannot write the file ({exc.strerror or exc})") from None


def check_outputs(outputs) -> None:
    """:func:`check_output` on each ``(path, option, kind)`` whose path is given (a
    sub-command's ``outputs(args)``, checked by :func:`gnnscale.cli.main.main` before it
    runs)."""
    for path, option, kind in outputs:
        if path:
            check_output(path, option, kind)
