"""A graph carried inside another package's ``.tar.gz`` (SNAP's amazon0601 in kuzu's source
package on PyPI): the one member is installed gzip-compressed where the SNAP loader reads it,
the archive is removed, and a wrong archive installs nothing.

The archive is written here in the source package's layout and served from a local mirror; the
registry's SHA-256 is that of the real package, so the tests give the entry their archive's.
"""

import dataclasses
import gzip
import hashlib
import io
import tarfile

import numpy as np
import pytest

from gnnscale.data import load_dataset
from gnnscale.data import registry
from gnnscale.data.download import STAGING, download_dataset
from gnnscale.data.registry import BASE_URL_ENV
from gnnscale.errors import DataError

from http_mirror import MirrorServer

ENTRY = registry.REGISTRY["amazon0601"]
EDGES = np.array([[0, 1], [0, 2], [1, 2], [2, 5], [5, 3], [4, 0]])


@pytest.fixture(autouse=True)
def no_internet(monkeypatch):
    monkeypatch.setenv(BASE_URL_ENV, "http://127.0.0.1:9")


def serve(folder, data: bytes, monkeypatch) -> None:
    """Serve ``data`` from the mirror where the entry's archive is, and give the registry entry
    its SHA-256."""
    path = folder / ENTRY.source / ENTRY.files[0].remote
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    archive = dataclasses.replace(ENTRY.files[0], sha256=hashlib.sha256(data).hexdigest())
    monkeypatch.setitem(registry.REGISTRY, "amazon0601",
                        dataclasses.replace(ENTRY, files=(archive,)))


def serve_archive(folder, members: dict[str, bytes], monkeypatch) -> None:
    """:func:`serve` a .tar.gz holding ``members``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    serve(folder, buffer.getvalue(), monkeypatch)


def edge_text(edges) -> bytes:
    return "".join(f"{s}\t{d}\n" for s, d in edges).encode()


def test_the_member_is_installed_where_the_snap_loader_reads_it(tmp_path, monkeypatch):
    serve_archive(tmp_path / "mirror", {ENTRY.tar_member.member: edge_text(EDGES),
                                        "sdist/kuzu-source/README.md": b"other files"},
                  monkeypatch)
    root = tmp_path / "root"
    with MirrorServer(tmp_path / "mirror") as mirror:
        folder = download_dataset("amazon0601", root, base_url=mirror.url, progress=False)
        served = len(mirror.requests)
        download_dataset("amazon0601", root, base_url=mirror.url, progress=False)
        assert len(mirror.requests) == served  # installed: not fetched again
    assert folder == root / "SNAP-amazon0601"
    installed = root / "SNAP-amazon0601" / "raw" / "amazon0601.txt.gz"
    assert gzip.decompress(installed.read_bytes()) == edge_text(EDGES)
    assert sorted(p.name for p in root.iterdir()) == ["SNAP-amazon0601"]  # archive removed
    graph = load_dataset("amazon0601", root=root)
    assert graph.num_nodes == 6 and graph.num_edges == 2 * len(EDGES)  # made undirected


@pytest.mark.parametrize("members,message", [
    ({"sdist/kuzu-source/README.md": b"no graph here"}, "holds no sdist/kuzu-source/dataset"),
    (None, "is not a valid .tar.gz archive"),
])
def test_a_wrong_archive_installs_nothing(tmp_path, monkeypatch, members, message):
    if members is None:  # bytes that are no archive at all
        serve(tmp_path / "mirror", b"not an archive", monkeypatch)
    else:
        serve_archive(tmp_path / "mirror", members, monkeypatch)
    root = tmp_path / "root"
    with MirrorServer(tmp_path / "mirror") as mirror, pytest.raises(DataError, match=message):
        download_dataset("amazon0601", root, base_url=mirror.url, progress=False)
    assert not (root / "SNAP-amazon0601").exists()
    left = [p for p in (root / STAGING).rglob("*") if p.is_file() and p.suffix != ".lock"] \
        if (root / STAGING).exists() else []
    assert left == []
