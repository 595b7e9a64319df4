"""``load_dataset``: one entry point for known dataset names, generators and paths in any layout."""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import NamedTuple

from gnnscale.data.graph_data import GraphData
from gnnscale.data.npz import npz_keys
from gnnscale.data.ogb_binary import is_ogb_binary
from gnnscale.data.pyg_npz import is_pyg_npz
from gnnscale.data.registry import REGISTRY, did_you_mean
from gnnscale.errors import DataError, DatasetNotFoundError

# Known names -> (loader kind, candidate locations under the data root, first existing wins).
_FILE_DATASETS = {
    "cora": ("planetoid", ["Cora/raw", "Cora", "cora/raw", "cora"]),
    "citeseer": ("planetoid", ["CiteSeer/raw", "CiteSeer", "citeseer/raw", "citeseer"]),
    "pubmed": ("planetoid", ["PubMed/raw", "PubMed", "pubmed/raw", "pubmed"]),
    **{name: ("heterophilous", [f"{name}/raw/{name}.npz", f"{name}/{name}.npz", f"{name}.npz"])
       for name in ("tolokers", "minesweeper", "roman_empire", "amazon_ratings", "questions")},
    **{name: ("snap", [f"SNAP-{name}/raw/{name}.txt.gz", f"{name}/raw/{name}.txt.gz",
                       f"{name}.txt.gz", f"{name}.txt"])
       for name in ("email-enron", "email-enron-cc1", "facebook-combined", "astro-ph-cc1",
                    "amazon0601")},
    **{name.lower(): ("ogb", [name.replace("-", "_"), name])
       for name in ("ogbn-arxiv", "ogbn-products", "ogbn-papers100M")},
}
GENERATED = ("sbm", "rmat", "dcsbm")
"""Names of the generated graphs."""
_ALIASES = {"roman-empire": "roman_empire", "amazon-ratings": "amazon_ratings",
            "ca-astroph": "astro-ph-cc1"}
_SNAP_FOLDERS = {"astro-ph-cc1": "SNAP-ca-astroph", "email-enron-cc1": "SNAP-email-enron"}

SHIPPED_ONLY = ("ca-astroph", "email-enron-cc1")
"""Names read from the checkout's ``datasets/`` only (largest connected components of SNAP
graphs; not downloadable)."""

DATASET_NAMES = (*REGISTRY, *SHIPPED_ONLY, *GENERATED)
"""Names :func:`load_dataset` knows (case-insensitive), as ``gnnscale datasets list`` shows
them: the downloadable ones, the shipped-only ones, the generators; anything else is taken
as a path."""

# Default R-MAT size for load_dataset("rmat") when no scale is given: 4,096 nodes.
DEFAULT_RMAT_SCALE = 12


def default_root() -> Path:
    """The data root: ``$GNNSCALE_DATA_ROOT`` if set, else ``./data``."""
    return Path(os.environ.get("GNNSCALE_DATA_ROOT") or "data")


def load_dataset(name_or_path, root=None, *, split: int = 0, **options) -> GraphData:
    """Load a dataset by name, generate one, or read a path in any supported layout.

    Args:
        name_or_path: a name from :data:`DATASET_NAMES` (case-insensitive): ``cora``,
            ``citeseer``, ``pubmed`` (Planetoid raw pickles, looked up as ``<root>/Cora/raw`` or
            ``<root>/Cora``), ``tolokers``, ``minesweeper``, ... (heterophilous-graphs npz, looked
            up as ``<root>/<name>/raw/<name>.npz``), SNAP graphs (``email-enron``, ...), OGB
            node-property sets (``ogbn-arxiv``, ``ogbn-products``, ``ogbn-papers100M``, looked
            up as ``<root>/ogbn_arxiv``); ``gnnscale datasets download NAME`` fetches them;
            ``sbm``, ``rmat`` or ``dcsbm`` (generated, ``options`` go to
            :func:`generate_sbm` / :func:`generate_rmat` / :func:`generate_dcsbm`; ``rmat``
            defaults to ``scale=12`` and turns ``num_nodes`` into the smallest scale with that
            many nodes; ``dcsbm`` takes ``preset=ogbn-products`` and ``scale``); or a path to
            a file or directory whose layout is recognised from its contents (see
            :func:`load_path`).
        root: data root for names; default ``$GNNSCALE_DATA_ROOT``, else ``./data``.
        split: which split to use where a dataset has several (heterophilous: 0-9); for
            generated splits (SNAP, rmat, dcsbm, scipy files without masks) it varies the split's
            seed; Planetoid and OGB have one split (0); ``sbm`` ignores it (use ``seed``).
        options: keyword options for the format's loader (e.g. ``symmetrize``, ``scheme`` for
            OGB, ``num_classes`` for structure-only graphs); unknown options raise an error.

    Raises:
        DataError: unknown name, missing or unreadable files, malformed content.
    """
    source = find_source(name_or_path, root)
    if source.kind == "sbm":
        from gnnscale.data.sbm import generate_sbm

        return _call(generate_sbm, "the sbm generator", options)
    if source.kind == "dcsbm":
        from gnnscale.data.dcsbm import generate_dcsbm

        return _call(generate_dcsbm, "the dcsbm generator", {"split": split, **options})
    if source.kind == "rmat":
        from gnnscale.data.rmat import generate_rmat

        if "num_nodes" in options and "scale" not in options:
            # Nodes come in powers of two: the smallest scale with at least num_nodes nodes.
            options["scale"] = max(1, int(options.pop("num_nodes") - 1).bit_length())
        options = {"scale": DEFAULT_RMAT_SCALE, "split": split, **options}
        return _call(generate_rmat, "the rmat generator", options)
    if source.name is not None:  # a known name: the loader is told it
        options = {"name": source.name, **options}
    return _load_kind(source.kind, source.path, split, options)


class DatasetSource(NamedTuple):
    """What :func:`load_dataset` reads for a name or path (:func:`find_source`)."""

    kind: str
    """A generator's name (:data:`GENERATED`) or a loader's kind (:func:`detect_format`'s)."""
    path: Path | None
    """What the loader reads; None for a generator."""
    name: str | None = None
    """The known name the dataset was found by (None for a path or a generator)."""


def find_source(name_or_path, root=None) -> DatasetSource:
    """What :func:`load_dataset` would read for ``name_or_path`` under ``root`` (the same
    arguments, the same rules), found without reading the data: the command line refuses an
    unknown name or a missing path with it before loading anything heavy.

    Raises:
        DataError: an unknown name, a path that does not exist, a file or folder in no known
            layout (:func:`detect_format`); :class:`DatasetNotFoundError` for a known name
            that is not under ``root``.
    """
    text = os.fspath(name_or_path)
    key = _ALIASES.get(text.lower(), text.lower())
    if key in GENERATED:
        return DatasetSource(key, None)
    root = Path(root) if root is not None else default_root()
    if key in _FILE_DATASETS:
        path = find_dataset(key, root)
        if path is not None:
            return DatasetSource(_FILE_DATASETS[key][0], path, key)
        from gnnscale.data.registry import how_to_get, registered

        looked = ", ".join(str(root / c) for c in _candidates(key))
        raise DatasetNotFoundError(f"dataset {key!r} not found under data root {root} (looked "
                                   f"for {looked})",
                                   how_to_get(key, root) if registered(key) else None)
    path = Path(text).expanduser()
    if not _exists(path) and _exists(root / text):
        path = root / text
    if _exists(path):
        return DatasetSource(*detect_format(path))
    if _looks_like_path(text):
        raise DataError(f"dataset {text}: no such file or directory")
    raise DataError(f"unknown dataset {text!r}{did_you_mean(text, _spellings())}: not a known "
                    f"name ({', '.join(DATASET_NAMES)}) and no such file or directory")


def _spellings() -> list[str]:
    """Every name and alias :func:`load_dataset` takes."""
    return [*DATASET_NAMES, *_ALIASES]


def _looks_like_path(text: str) -> bool:
    """A dataset argument meant as a path (a folder separator, a leading ``.`` or ``~``, a file
    suffix) rather than a name: its error needs no list of names."""
    return "/" in text or os.sep in text or text.startswith((".", "~")) or \
        bool(Path(text).suffix)


def find_dataset(name: str, root) -> Path | None:
    """Where the known dataset ``name`` lies under ``root`` (the first of its usual locations
    that exists), or None; names are case-insensitive and aliases are accepted."""
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in _FILE_DATASETS:
        return None
    for candidate in _candidates(key):
        path = Path(root) / candidate
        if _exists(path):
            return path
    return None


def _candidates(key: str) -> list[str]:
    candidates = _FILE_DATASETS[key][1]
    if key in _SNAP_FOLDERS:
        candidates = [f"{_SNAP_FOLDERS[key]}/raw/{key}.txt.gz"] + candidates
    return candidates


def _exists(path: Path) -> bool:
    """``path.exists()``, but a folder on the way that cannot be entered is a DataError."""
    try:
        return path.exists()
    except OSError as exc:  # EACCES on a parent folder: pathlib raises, it does not say False
        raise DataError(f"{path} cannot be reached ({exc.strerror or exc})") from None


def detect_format(path) -> tuple[str, Path]:
    """Recognise the layout at ``path`` from its contents: ``(kind, path to load)``.

    Kinds: ``planetoid`` (a folder with ``ind.<name>.graph``, or its parent with ``raw/``),
    ``ogb`` (a folder with ``raw/edge.csv.gz`` and ``split/``), ``ogb_binary`` (a folder with
    ``raw/data.npz`` and ``split/``, e.g. ``papers100M-bin``), ``heterophilous`` (npz with
    ``node_features``), ``pyg`` (npz with PyG's ``edge_index`` and ``x``), ``scipy`` (an npz
    written by ``scipy.sparse.save_npz``), ``snap``
    (``.txt``/``.txt.gz``/``.tsv``/``.edges`` edge list). A folder holding exactly one
    recognisable file or dataset folder (directly or in ``raw/``) is looked through.
    """
    path = Path(path)
    if path.is_dir():
        if (path / "manifest.json").is_file():
            return _manifest_kind(path), path
        if any(path.glob("ind.*.graph")) or any((path / "raw").glob("ind.*.graph")):
            return "planetoid", path
        if _is_ogb(path):
            return "ogb", path
        if is_ogb_binary(path):
            return "ogb_binary", path
        found = [c for c in _children(path) if _recognisable(c)]
        if len(found) == 1:
            return detect_format(found[0])
        if found:
            names = ", ".join(str(c) for c in found)
            raise DataError(f"folder {path} holds several datasets ({names}); pass one of them")
        raise DataError(f"folder {path} holds no dataset in a known layout (Planetoid "
                        "ind.<name>.*, OGB raw/ + split/, .npz, SNAP .txt[.gz])")
    if not path.is_file():
        raise DataError(f"path {path} does not exist")
    try:  # say "permission denied" rather than "not a readable .npz" when that is the cause
        path.open("rb").close()
    except OSError as exc:
        raise DataError(f"{path} cannot be read ({exc.strerror or exc})") from None
    name = path.name.lower()
    if name.startswith("ind.") and name.endswith(".graph"):
        return "planetoid", path.parent
    if name.endswith(".npz"):
        keys = npz_keys(path)
        if keys is None:
            raise DataError(f"{path} is not a readable .npz (zip) file")
        if "node_features" in keys or "edges" in keys:
            return "heterophilous", path
        if is_pyg_npz(keys):
            return "pyg", path
        if "format" in keys and "shape" in keys:
            return "scipy", path
        raise DataError(f"{path} is an npz of unknown layout (arrays: {', '.join(keys)}); "
                        "expected heterophilous-graphs keys (node_features, edges, ...), PyG "
                        "arrays (edge_index, x, y, masks) or a scipy.sparse.save_npz matrix")
    if name.endswith(_SNAP_SUFFIXES):
        return "snap", path
    raise DataError(f"cannot tell the format of {path}: supported files are .npz "
                    "(heterophilous-graphs, PyG arrays or scipy.sparse) and SNAP edge lists "
                    f"({', '.join(_SNAP_SUFFIXES)})")


def load_path(path, *, split: int = 0, **options) -> GraphData:
    """Load the dataset at ``path`` in whatever supported layout :func:`detect_format` finds."""
    kind, target = detect_format(path)
    return _load_kind(kind, target, split, options)


_SNAP_SUFFIXES = (".txt", ".txt.gz", ".tsv", ".tsv.gz", ".edges", ".edges.gz", ".el", ".el.gz")


def _manifest_kind(folder: Path) -> str:
    """``converted`` for a converted graph folder (any version: opening checks it); a partition
    store or another manifest is refused with what to do instead."""
    import json

    from gnnscale.data.converted import FORMAT

    try:
        kind = json.loads((folder / "manifest.json").read_text()).get("format")
    except (OSError, ValueError, AttributeError):
        kind = None
    if kind == FORMAT:
        return "converted"
    if kind == "gnnscale-partition-store":
        raise DataError(f"{folder} is a partition store, not a dataset: train on it with "
                        f"--partitions {folder}")
    raise DataError(f"{folder}/manifest.json is not a converted graph manifest (format "
                    f"{kind!r}); convert the dataset with `gnnscale convert`")


def _children(folder: Path):
    entries = sorted(folder.iterdir())
    raw = folder / "raw"
    if raw.is_dir():
        entries += sorted(raw.iterdir())
    return [e for e in entries if e.name not in ("raw", "processed") and not e.name.startswith(".")]


def _recognisable(path: Path) -> bool:
    name = path.name.lower()
    if path.is_file():
        if name.endswith(".nodes.npz"):  # a scipy adjacency's sidecar, not a dataset itself
            return False
        return name.endswith(".npz") or name.endswith(_SNAP_SUFFIXES) or \
            (name.startswith("ind.") and name.endswith(".graph"))
    if path.is_dir():
        return any(path.glob("ind.*.graph")) or any((path / "raw").glob("ind.*.graph")) or \
            _is_ogb(path) or is_ogb_binary(path)
    return False


def _is_ogb(path: Path) -> bool:
    raw = path / "raw"
    return any((raw / name).is_file() for name in ("edge.csv.gz", "edge.csv")) \
        and (path / "split").is_dir()


def _load_kind(kind: str, path: Path, split: int, options: dict) -> GraphData:
    if kind == "planetoid":
        from gnnscale.data.planetoid import load_planetoid as loader
    elif kind == "heterophilous":
        from gnnscale.data.heterophilous import load_heterophilous as loader
    elif kind == "snap":
        from gnnscale.data.snap import load_snap as loader
    elif kind == "ogb":
        from gnnscale.data.ogb import load_ogb as loader
    elif kind == "ogb_binary":
        from gnnscale.data.ogb_binary import load_ogb_binary as loader
    elif kind == "pyg":
        from gnnscale.data.pyg_npz import load_pyg_npz as loader
    elif kind == "scipy":
        from gnnscale.data.scipy_io import load_scipy as loader
    elif kind == "converted":
        from gnnscale.data.converted import open_converted as loader
    else:  # pragma: no cover - detect_format only returns the kinds above
        raise AssertionError(kind)
    if kind in ("planetoid", "converted"):
        options = {k: v for k, v in options.items() if k != "name"}  # prefix comes from files
    try:
        return _call(loader, f"the {kind} loader", {"split": split, **options}, path)
    except MemoryError:
        raise DataError(f"not enough memory to load {path} as {kind} data; the file may be "
                        "corrupt, or the graph is too large for this machine") from None


def _call(function, what: str, options: dict, *args):
    accepted = inspect.signature(function).parameters
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        takes = ", ".join(p for p in accepted if p not in ("path", "folder"))
        raise DataError(f"option {', '.join(map(repr, unknown))} is not understood by {what} "
                        f"(it takes: {takes})")
    return function(*args, **options)
