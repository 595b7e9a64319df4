"""Download a registered dataset into a data root: checked, resumable and atomic.

``download_dataset("cora", "data")`` fetches the publisher's files (see
:mod:`gnnscale.data.registry`) into ``data/.download/<name>/``, a hidden staging folder that no
loader looks into. Each file is written as ``<file>.part`` and renamed to its name only once its
length matches what the server announced and its SHA-256 matches the registry's (where known);
an interrupted transfer keeps the ``.part`` file and the next run continues it with an HTTP
``Range`` request. When every file is complete, zip archives are extracted (member CRCs checked)
and the finished folder is renamed into place (``data/Cora``, ``data/ogbn_arxiv``, ...). So a
failed or interrupted download never leaves anything where the loaders look. SNAP's ``.txt.gz``
files stay compressed: the SNAP loader reads gzip directly. A graph carried inside another
package's ``.tar.gz`` (SNAP's amazon0601 in kuzu's source package on PyPI) is installed as its
one file, gzip-compressed, and the archive is removed.

Processes that download the same dataset into the same root at once (the ranks of one host
under ``mpirun ... --download``) take turns through a lock file: the first downloads, the
others then find the dataset installed.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.client
import io
import os
import re
import shutil
import tarfile
import urllib.error
import urllib.request
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from gnnscale.data.registry import DatasetEntry, entry_for
from gnnscale.errors import DataError

STAGING = ".download"
"""Hidden folder under the data root where partial downloads live."""

_CHUNK = 1 << 20


def installed(entry: DatasetEntry, root) -> bool:
    """True when ``entry``'s files (or, for an archive, its extracted folder) are in place."""
    root = Path(root)
    if entry.archive_folder is not None:
        return (root / entry.installs / "raw").is_dir()
    if entry.tar_member is not None:
        return (root / entry.tar_member.target).is_file()
    return all((root / file.target).is_file() for file in entry.files)


def download_dataset(name: str, root, *, base_url: str | None = None, progress: bool = True,
                     timeout: float = 60.0) -> Path:
    """Download the registered dataset ``name`` into data root ``root``; return its folder.

    Does nothing (and needs no network) when the dataset is already installed there.

    Args:
        name: a name from :data:`gnnscale.data.registry.REGISTRY` (case-insensitive).
        root: the data root; created if missing.
        base_url: fetch from ``<base_url>/<source>/<file>`` instead of the publisher (a mirror);
            default ``$GNNSCALE_DOWNLOAD_BASE_URL``, else the publisher's URL.
        progress: show a tqdm progress bar per file (on stderr).
        timeout: seconds a connection may stay silent before the transfer counts as stopped.

    Raises:
        DataError: unknown name, HTTP error, a transfer that stopped (run again to resume), a
            checksum mismatch (the bad file is removed), a bad archive, too little disk space.
    """
    entry = entry_for(name)
    root = Path(root)
    final = root / entry.installs
    staging = root / STAGING / entry.name
    created = [p for p in (staging.parent, *staging.parent.parents) if not p.exists()]
    try:
        make_folder(staging.parent)
    except OSError as exc:
        _remove_empty_folders(staging.parent, created)
        raise DataError(f"cannot create {staging.parent} ({exc.strerror or exc})") from None
    try:
        with _locked(root / STAGING / f"{entry.name}.lock"):
            try:
                if installed(entry, root):
                    return final
                for file in entry.files:
                    fetch(entry.url(file, base_url), staging / file.target,
                          sha256=file.sha256, progress=progress, timeout=timeout)
                if entry.archive_folder is not None:
                    _install_archive(entry, staging, root)
                elif entry.tar_member is not None:
                    _install_tar_member(entry, staging, root)
                else:
                    _install_files(staging, root)
                shutil.rmtree(staging, ignore_errors=True)
            finally:  # a failure keeps partial files to resume from, and nothing else
                _remove_empty_folders(staging, [staging])  # under the lock: no one writes
    finally:
        _remove_empty_folders(staging.parent, [staging.parent, *created])
    return final


def make_folder(path: Path, tries: int = 100) -> None:
    """``path.mkdir(parents=True, exist_ok=True)`` while another download may remove the same
    empty folder: a folder that existed when made but was gone when checked is made again
    (``Path.mkdir`` raises ``FileExistsError`` then)."""
    for _ in range(tries - 1):
        try:
            path.mkdir(parents=True, exist_ok=True)
            return
        except FileExistsError:
            if path.exists() and not path.is_dir():
                raise
    path.mkdir(parents=True, exist_ok=True)


def _remove_empty_folders(top: Path, folders) -> None:
    """Remove the empty folders under ``top`` (deepest first), then those of ``folders`` that
    are empty (innermost first); folders holding anything stay (``STAGING`` holds the lock
    files of downloads in progress)."""
    if top.is_dir() and top.name != STAGING:
        for path, _, _ in sorted(os.walk(top), key=lambda entry: -len(entry[0])):
            with contextlib.suppress(OSError):
                os.rmdir(path)
    for folder in sorted(folders, key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            folder.rmdir()


def fetch(url: str, dest, *, sha256: str | None = None, progress: bool = True,
          timeout: float = 60.0) -> Path:
    """Fetch ``url`` to ``dest`` through ``dest.part``, resuming a ``.part`` left by an earlier
    run; ``dest`` appears only when the whole file arrived and matches ``sha256`` (if given)."""
    dest = Path(dest)
    if dest.is_file():
        return dest
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    offset = part.stat().st_size if part.is_file() else 0
    response, offset, total = _open(url, offset, timeout)
    if total is not None:
        _check_space(dest.parent, total - offset, url)
    digest = hashlib.sha256()
    if offset:
        with part.open("rb") as handle:
            for block in iter(lambda: handle.read(_CHUNK), b""):
                digest.update(block)
    received = offset
    with response, part.open("ab" if offset else "wb") as out, \
            _progress_bar(progress, total, offset, dest.name) as bar:
        try:
            for block in iter(lambda: response.read1(_CHUNK), b""):  # what has arrived
                out.write(block)
                digest.update(block)
                received += len(block)
                bar.update(len(block))
        except (OSError, http.client.HTTPException) as exc:  # reset, timeout, short read
            out.flush()
            raise _stopped(url, received, total, exc) from None
    if total is not None and received != total:
        raise _stopped(url, received, total, "the server closed the connection")
    if sha256 is not None and digest.hexdigest() != sha256:
        part.unlink()
        raise DataError(f"{url}: SHA-256 {digest.hexdigest()} does not match the expected "
                        f"{sha256}; the downloaded file was removed (run again to retry)")
    os.replace(part, dest)
    return dest


def _open(url: str, offset: int, timeout: float):
    """Open ``url`` from byte ``offset``: ``(response, offset actually used, total length)``."""
    request = urllib.request.Request(url, headers={"User-Agent": "gnnscale"})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # nothing left after offset: complete, or not a prefix
            match = re.match(r"bytes \*/(\d+)", exc.headers.get("Content-Range", ""))
            if match is not None and int(match.group(1)) == offset:
                return io.BytesIO(b""), offset, offset
            return _open(url, 0, timeout)
        raise DataError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise DataError(f"cannot reach {url} ({reason})") from None
    length = response.headers.get("Content-Length")
    if response.status == 206:
        match = re.match(r"bytes (\d+)-\d+/(\d+|\*)", response.headers.get("Content-Range", ""))
        if match is None or int(match.group(1)) != offset:
            response.close()
            raise DataError(f"{url}: the server answered a resume request with a bad "
                            f"Content-Range ({response.headers.get('Content-Range')!r})")
        total = int(match.group(2)) if match.group(2) != "*" else None
        return response, offset, total
    return response, 0, int(length) if length is not None else None  # 200: from the start


def _stopped(url: str, received: int, total, why) -> DataError:
    of = f" of {total:,}" if total is not None else ""
    return DataError(f"download of {url} stopped after {received:,}{of} bytes ({why}); run the "
                     "same command again to resume it")


def _check_space(folder: Path, needed: int, url: str) -> None:
    free = shutil.disk_usage(folder).free
    if needed > free:
        raise DataError(f"{url} needs {needed / 2**30:.2f} GiB but {folder} has "
                        f"{free / 2**30:.2f} GiB free")


def _install_files(staging: Path, root: Path) -> None:
    """Move the staged tree into ``root``: whole top folders by one rename where they are new,
    else file by file."""
    for top in sorted(staging.iterdir()):
        target = root / top.name
        if not target.exists():
            os.rename(top, target)
            continue
        for file in sorted(p for p in top.rglob("*") if p.is_file()):
            destination = target / file.relative_to(top)
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.replace(file, destination)


def _install_archive(entry: DatasetEntry, staging: Path, root: Path) -> None:
    """Extract the staged zip and rename its top folder to ``root / entry.installs``."""
    archive = staging / entry.files[0].target
    unpacked = staging / "unpacked"
    shutil.rmtree(unpacked, ignore_errors=True)
    try:
        with zipfile.ZipFile(archive) as zipped:
            for member in zipped.namelist():
                parts = PurePosixPath(member).parts
                if member.startswith("/") or ".." in parts:
                    raise DataError(f"{archive} holds an unsafe path {member!r}")
            zipped.extractall(unpacked)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        archive.unlink(missing_ok=True)
        raise DataError(f"{archive} is not a valid zip archive ({exc}); it was removed (run "
                        "again to download it anew)") from None
    inner = unpacked / entry.archive_folder
    if not (inner / "raw").is_dir():
        raise DataError(f"{archive} has no {entry.archive_folder}/raw/ folder; not the "
                        f"expected {entry.name} archive")
    os.rename(inner, root / entry.installs)


def _install_tar_member(entry: DatasetEntry, staging: Path, root: Path) -> None:
    """Write the staged ``.tar.gz``'s member ``entry.tar_member.member``, gzip-compressed, to
    ``root / entry.tar_member.target`` (through a staged file and one rename)."""
    archive = staging / entry.files[0].target
    wanted = entry.tar_member
    staged = staging / "unpacked" / wanted.target
    staged.parent.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(archive, "r:gz") as tar:
            # one pass up to the member: listing every name first would decompress the whole
            # archive, and reading the member then would decompress it again up to there
            member = next((info for info in tar if info.name == wanted.member), None)
            if member is None or not member.isfile():
                raise DataError(f"{archive} holds no {wanted.member}; not the expected "
                                f"{entry.name} archive; it was removed")
            with tar.extractfile(member) as source, gzip.open(staged, "wb", 1) as copy:
                shutil.copyfileobj(source, copy, _CHUNK)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        staged.unlink(missing_ok=True)
        archive.unlink(missing_ok=True)
        raise DataError(f"{archive} is not a valid .tar.gz archive ({exc}); it was removed "
                        "(run again to download it anew)") from None
    except DataError:
        archive.unlink(missing_ok=True)
        raise
    target = root / wanted.target
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staged, target)


@contextlib.contextmanager
def _locked(path: Path):
    """Hold an exclusive lock on ``path``, removed again on release: whoever waited on the
    removed file sees that the path no longer names it and locks a new one."""
    import fcntl

    while True:
        make_folder(path.parent)
        try:
            handle = path.open("a")
        except FileNotFoundError:  # the folder went empty and was removed: make it again
            continue
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            current = os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
        except FileNotFoundError:
            current = False
        if current:
            break
        handle.close()
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # before unlocking, so no one locks the old file anew
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


@contextlib.contextmanager
def _progress_bar(enabled: bool, total, initial: int, label: str):
    from tqdm.auto import tqdm

    bar = tqdm(total=total, initial=initial, unit="B", unit_scale=True, unit_divisor=1024,
               desc=label, disable=not enabled, leave=True)
    try:
        yield bar
    finally:
        bar.close()

