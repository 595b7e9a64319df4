"""The public datasets gnnscale can download: where each comes from and where it goes on disk.

Each :class:`DatasetEntry` names the publisher's files (URLs relative to a source's base URL),
the place under a data root where :func:`gnnscale.data.load_dataset` finds them, and how each
file is checked: by SHA-256 where the digest is known (the files this repository ships in
``datasets/`` are byte-identical copies of the publishers' files), else by the size the server
announces. :mod:`gnnscale.data.download` does the transfer.

The base URL of every source can be replaced, for a mirror or for tests, with ``base_url=`` or
the environment variable ``GNNSCALE_DOWNLOAD_BASE_URL``: a file is then fetched from
``<base>/<source>/<file>`` (for example ``<base>/planetoid/ind.cora.x``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gnnscale.errors import DataError

BASE_URL_ENV = "GNNSCALE_DOWNLOAD_BASE_URL"

# The publishers' base URLs (the ones PyG's Planetoid and HeterophilousGraphDataset, SNAP's pages
# and the ``ogb`` package's master.csv use).
SOURCES = {
    "planetoid": "https://github.com/kimiyoung/planetoid/raw/master/data",
    "heterophilous": "https://github.com/yandex-research/heterophilous-graphs/raw/main/data",
    "snap": "https://snap.stanford.edu/data",
    "ogb": "https://snap.stanford.edu/ogb/data/nodeproppred",
    "kuzu": "https://files.pythonhosted.org/packages",  # PyPI's files: kuzu's source packages
}

_LICENCES = {
    "planetoid": "MIT (kimiyoung/planetoid)",
    "heterophilous": "MIT (yandex-research/heterophilous-graphs)",
    "snap": "SNAP, free for research use",
    "ogb": "per dataset, see ogb.stanford.edu (arxiv: ODC-BY; products: Amazon licence; "
           "papers100M: ODC-BY)",
    "kuzu": "SNAP, free for research use (SNAP's graph as the kuzu 0.3.2 source package on "
            "PyPI carries it for kuzu's tests; kuzu itself: MIT)",
}


@dataclass(frozen=True)
class RemoteFile:
    """One file a publisher serves: ``remote`` under the source's base URL, ``target`` under the
    data root (the archive itself for zips, which are extracted and then removed)."""

    remote: str
    target: str
    sha256: str | None = None


@dataclass(frozen=True)
class TarMember:
    """The one file of a downloaded ``.tar.gz`` that a dataset installs: ``member``'s bytes,
    gzip-compressed, become ``target`` under the data root (the archive is then removed)."""

    member: str
    target: str


@dataclass(frozen=True)
class DatasetEntry:
    """A downloadable dataset.

    Attributes:
        name: the name :func:`~gnnscale.data.load_dataset` takes.
        source: key of :data:`SOURCES`.
        files: what to fetch.
        installs: folder (relative to the data root) that holds the dataset once installed;
            for a zip archive, the archive's top folder is renamed to it.
        archive_folder: for zip archives, the top folder inside the archive.
        tar_member: for a ``.tar.gz`` that carries the dataset among other things (a source
            package), the one file to install from it.
        size: download size for the listing where known ("" if not); the transfer itself is
            checked against the length the server announces.
        description: one line for ``gnnscale datasets list``.
    """

    name: str
    source: str
    files: tuple[RemoteFile, ...]
    installs: str
    size: str
    description: str
    archive_folder: str | None = None
    tar_member: TarMember | None = None

    @property
    def licence(self) -> str:
        """The licence the publisher states for the data."""
        return _LICENCES[self.source]

    def url(self, file: RemoteFile, base_url: str | None = None) -> str:
        """The URL of ``file``: the publisher's, or ``<base>/<source>/<remote>`` when a base URL
        is given (``base_url`` or ``$GNNSCALE_DOWNLOAD_BASE_URL``)."""
        base = base_url or os.environ.get(BASE_URL_ENV)
        if base:
            return f"{base.rstrip('/')}/{self.source}/{file.remote}"
        return f"{SOURCES[self.source]}/{file.remote}"


# SHA-256 of the publishers' files that datasets/ ships unchanged (datasets/SOURCES.md).
_PLANETOID_SHA256 = {
    "cora": {
        "x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
        "tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
        "allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
        "y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
        "ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
        "ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
        "graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
        "test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
    },
    "citeseer": {
        "x": "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",
        "tx": "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",
        "allx": "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",
        "y": "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",
        "ty": "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",
        "ally": "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",
        "graph": "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",
        "test.index": "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",
    },
}
_HETEROPHILOUS_SHA256 = {
    "tolokers": "dacf3ac94cec53d03cd2adb5255c08b33dee1656c33ca8164a464bd9450a1667",
    "minesweeper": "e664c8dacf1e8ac466c2c09ed4b237bd2c5541f47a6eae9c6092cb87f16412b3",
}
_PLANETOID_PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


def _planetoid(name: str, folder: str, size: str, description: str) -> DatasetEntry:
    digests = _PLANETOID_SHA256.get(name, {})
    files = tuple(RemoteFile(f"ind.{name}.{part}", f"{folder}/raw/ind.{name}.{part}",
                             digests.get(part)) for part in _PLANETOID_PARTS)
    return DatasetEntry(name, "planetoid", files, folder, size, description)


def _heterophilous(name: str, size: str, description: str) -> DatasetEntry:
    file = RemoteFile(f"{name}.npz", f"{name}/raw/{name}.npz", _HETEROPHILOUS_SHA256.get(name))
    return DatasetEntry(name, "heterophilous", (file,), name, size, description)


def _snap(name: str, remote: str, size: str, description: str) -> DatasetEntry:
    file = RemoteFile(remote, f"SNAP-{name}/raw/{name}.txt.gz")
    return DatasetEntry(name, "snap", (file,), f"SNAP-{name}", size, description)


def _snap_in_kuzu(name: str, edges: str, size: str, description: str) -> DatasetEntry:
    """A SNAP graph from kuzu 0.3.2's source package on PyPI, which carries SNAP's edge list
    unchanged (``src<TAB>dst``, no comment lines) for kuzu's own tests."""
    archive = RemoteFile("97/d5/0c574aad3323be3c1aefac58593fff0862322b18aeb2cd2c479ffe3dff86/"
                         "kuzu-0.3.2.tar.gz", "kuzu-0.3.2.tar.gz",
                         "f08366e0102ac3be6aeb2335563257e0c1a4977fecd20c5e124d2aeb8b818af6")
    member = TarMember(f"sdist/kuzu-source/dataset/snap/{edges}", f"SNAP-{name}/raw/{name}.txt.gz")
    return DatasetEntry(name, "kuzu", (archive,), f"SNAP-{name}", size, description,
                        tar_member=member)


def _ogb(name: str, archive: str, size: str, description: str) -> DatasetEntry:
    folder = name.replace("-", "_")
    return DatasetEntry(name, "ogb", (RemoteFile(f"{archive}.zip", f"{folder}.zip"),), folder,
                        size, description, archive_folder=archive)


REGISTRY: dict[str, DatasetEntry] = {entry.name: entry for entry in (
    _planetoid("cora", "Cora", "0.6 MB", "citation graph, 2,708 nodes, 7 classes (Planetoid)"),
    _planetoid("citeseer", "CiteSeer", "1.1 MB",
               "citation graph, 3,327 nodes, 6 classes (Planetoid)"),
    _planetoid("pubmed", "PubMed", "",
               "citation graph, 19,717 nodes, 3 classes (Planetoid)"),
    _heterophilous("roman_empire", "", "word graph, 22,662 nodes, 18 classes"),
    _heterophilous("amazon_ratings", "", "co-purchase graph, 24,492 nodes, 5 classes"),
    _heterophilous("minesweeper", "0.1 MB", "grid graph, 10,000 nodes, 2 classes (ROC AUC)"),
    _heterophilous("tolokers", "1.3 MB", "crowd-worker graph, 11,758 nodes, 2 classes (ROC AUC)"),
    _heterophilous("questions", "", "Q&A user graph, 48,921 nodes, 2 classes (ROC AUC)"),
    _snap("email-enron", "email-Enron.txt.gz", "",
          "SNAP e-mail graph, 36,692 nodes, structure only"),
    _snap("facebook-combined", "facebook_combined.txt.gz", "",
          "SNAP ego-Facebook, 4,039 nodes, structure only"),
    _snap_in_kuzu("amazon0601", "amazon0601/csv/amazon-edges.csv", "98 MB",
                  "SNAP Amazon co-purchase graph (June 2003), 403,394 nodes, 3,387,388 edges, "
                  "structure only"),
    _ogb("ogbn-arxiv", "arxiv", "81 MB", "OGB citation graph, 169,343 nodes, 40 classes"),
    _ogb("ogbn-products", "products", "1.4 GB",
         "OGB co-purchase graph, 2,449,029 nodes, 47 classes"),
    _ogb("ogbn-papers100M", "papers100M-bin", "57 GB",
         "OGB citation graph, 111,059,956 nodes, 172 classes (binary npz layout)"),
)}
"""Every downloadable dataset by name."""


def registered(name: str) -> DatasetEntry | None:
    """The entry for ``name`` (case-insensitive, ``-`` and ``_`` alike), or None."""
    wanted = name.lower().replace("_", "-")
    for key, entry in REGISTRY.items():
        if key.lower().replace("_", "-") == wanted:
            return entry
    return None


def entry_for(name: str) -> DatasetEntry:
    """The entry for ``name``; an unknown name is a :class:`DataError` listing the known ones."""
    entry = registered(name)
    if entry is None:
        raise DataError(f"no downloadable dataset named {name!r}{did_you_mean(name, REGISTRY)} "
                        f"(known: {', '.join(REGISTRY)})")
    return entry


def did_you_mean(word: str, names) -> str:
    """``" (did you mean 'cora'?)"`` for the name closest to ``word`` (case-insensitive,
    ``-`` and ``_`` alike), or ``""`` when none is close."""
    import difflib

    def key(text: str) -> str:
        return text.lower().replace("_", "-")

    by_key = {key(name): name for name in names}
    close = difflib.get_close_matches(key(word), list(by_key), n=1, cutoff=0.6)
    return f" (did you mean {by_key[close[0]]!r}?)" if close else ""


def shipped_root() -> Path | None:
    """The ``datasets/`` folder of the source checkout gnnscale runs from, if there is one
    (and this user may read it)."""
    folder = Path(__file__).resolve().parents[2] / "datasets"
    try:
        return folder if (folder / "SOURCES.md").is_file() else None
    except OSError:  # e.g. a checkout in a folder this user cannot enter
        return None


def how_to_get(name: str, root) -> str:
    """One sentence telling how to obtain dataset ``name`` under data root ``root``."""
    entry = registered(name)
    if entry is None:
        return "pass root= / --data-root or set GNNSCALE_DATA_ROOT"
    return (f"download it with `gnnscale datasets download {entry.name} --data-root {root}` "
            "(or add --download to this command), or point --data-root / GNNSCALE_DATA_ROOT "
            "at a folder that holds it")
