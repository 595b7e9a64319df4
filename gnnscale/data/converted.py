"""gnnscale's own on-disk graph: a folder of ``.npy`` files opened memory-mapped.

``gnnscale convert --dataset SRC --out DIR`` writes any supported source once into this layout;
every command then takes ``DIR`` as ``--dataset``. Opening it reads the manifest and the ``.npy``
headers only: rows are read from disk when a part needs them, so a second load of a
2-million-node graph takes well under a second and copies no feature rows into memory.

Layout of ``DIR``::

    manifest.json      format, format_version, name, counts, num_classes, per file: name,
                       dtype, shape, bytes and sha256 (written last)
    indptr.npy         int64 [N + 1]  CSR by destination (row v lists the sources of v's in-edges)
    indices.npy        int64 [E]
    x.npy              float32 [N, F]
    y.npy              int64 [N]      -1 marks an unlabelled node
    train_mask.npy, val_mask.npy, test_mask.npy   bool [N]
    out_degree.npy     int64 [N]      derived: out-degree of every node (normalisation, parts)
    self_loops.npy     int64 [N]      derived: number of v -> v edges at every node

The folder is written atomically (a temporary folder renamed into place, every file fsynced, the
manifest last). Every open checks the manifest's format and version, each file's size and its
``.npy`` header against the manifest; :func:`verify_converted` (``gnnscale convert`` re-reading a
converted folder, ``gnnscale info``) also checks every file's sha256.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np

from gnnscale.data.graph_data import GraphData
from gnnscale.errors import DataError

FORMAT = "gnnscale-graph"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"

# name -> dtype of every array a converted folder holds, in writing order.
ARRAYS = {"indptr": "int64", "indices": "int64", "x": "float32", "y": "int64",
          "train_mask": "bool", "val_mask": "bool", "test_mask": "bool",
          "out_degree": "int64", "self_loops": "int64"}
DERIVED = ("out_degree", "self_loops")

__all__ = ["FORMAT", "FORMAT_VERSION", "write_converted", "open_converted", "verify_converted",
           "is_converted", "read_manifest"]


def is_converted(path) -> bool:
    """Whether ``path`` is a folder with a manifest of this format (any version)."""
    manifest = Path(path) / MANIFEST
    if not manifest.is_file():
        return False
    try:
        return json.loads(manifest.read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def write_converted(data: GraphData, out_dir, *, overwrite: bool = False, source: str = "",
                    on_bytes=None) -> dict:
    """Write ``data`` as a converted graph folder at ``out_dir``; return the manifest.

    Arrays are written in row blocks (``data``'s arrays may themselves be memory-mapped), the
    sha256 of each file is computed as it is written. ``out_dir`` must not exist unless
    ``overwrite`` (then it must be a converted graph, replaced atomically); missing parent
    folders are created. ``on_bytes(n)`` reports progress. Raises :class:`DataError`; nothing is
    left at ``out_dir`` on failure.
    """
    from partitioning.atomic_files import (install_folder, temp_folder_beside, write_npy,
                                           write_synced)
    from partitioning.local_view import out_degree_and_self_loops

    out_dir = Path(out_dir).absolute()
    _check_target(out_dir, overwrite)
    stats = getattr(data, "node_stats", None) or {}
    if "out_degree" not in stats or "self_loops" not in stats:
        out_degree, self_loops = out_degree_and_self_loops(data.indptr, data.indices,
                                                           data.num_nodes)
        stats = {"out_degree": out_degree, "self_loops": self_loops}
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_folder_beside(out_dir)
    except OSError as exc:
        raise DataError(f"cannot write converted graph {out_dir}: {exc.strerror or exc}") \
            from None
    try:
        files = {}
        for name, dtype in ARRAYS.items():
            array = stats[name] if name in DERIVED else getattr(data, name)
            files[name] = write_npy(tmp / f"{name}.npy", array, dtype=dtype, on_bytes=on_bytes)
        manifest = {
            "format": FORMAT, "format_version": FORMAT_VERSION, "name": data.name,
            "num_nodes": data.num_nodes, "num_edges": data.num_edges,
            "num_features": data.num_features, "num_classes": data.num_classes,
            "split_counts": {m: int(np.count_nonzero(getattr(data, f"{m}_mask")))
                             for m in ("train", "val", "test")},
            "source": str(source), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "files": files,
        }
        write_synced(tmp / MANIFEST,
                     lambda fh: fh.write(json.dumps(manifest, indent=1).encode()))
        install_folder(tmp, out_dir)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise DataError(f"writing converted graph {out_dir} failed: "
                            f"{exc.strerror or exc} ({exc.filename or tmp})") from None
        raise
    return manifest


def _check_target(out_dir: Path, overwrite: bool) -> None:
    if out_dir.exists() and not overwrite:
        raise DataError(f"{out_dir} already exists; remove it or pass --overwrite")
    if out_dir.exists() and not is_converted(out_dir):
        raise DataError(f"refusing to replace {out_dir}: it exists and is not a converted graph")
    ancestor = out_dir.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise DataError(f"cannot write {out_dir}: {ancestor} is not a folder")


def read_manifest(folder) -> dict:
    """The manifest of a converted folder, checked for format, version and entries."""
    from partitioning.atomic_files import read_manifest_file

    folder = Path(folder)
    path = folder / MANIFEST
    manifest = read_manifest_file(path, FORMAT, FORMAT_VERSION, DataError, "gnnscale convert")
    files = manifest.get("files")
    missing = [name for name in ARRAYS if not isinstance(files, dict) or name not in files]
    if missing or not isinstance(manifest.get("num_nodes"), int):
        raise DataError(f"{path} lacks entries ({', '.join(missing) or 'num_nodes'}): the "
                        "folder is damaged; convert the source again")
    return manifest


def _expected_shape(name: str, manifest: dict) -> tuple:
    n, e, f = manifest["num_nodes"], manifest["num_edges"], manifest["num_features"]
    return {"indptr": (n + 1,), "indices": (e,), "x": (n, f)}.get(name, (n,))


def _open_array(folder: Path, name: str, manifest: dict) -> np.ndarray:
    entry = manifest["files"][name]
    path = folder / entry["file"]
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise DataError(f"converted graph file {path} is missing") from None
    if size != entry["bytes"]:
        raise DataError(f"converted graph file {path} has {size} bytes, the manifest says "
                        f"{entry['bytes']} (truncated or altered)")
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DataError(f"converted graph file {path} is not a readable .npy file "
                        f"({exc})") from None
    shape = _expected_shape(name, manifest)
    if array.dtype != np.dtype(ARRAYS[name]) or array.shape != shape \
            or list(shape) != entry.get("shape"):
        raise DataError(f"converted graph file {path} holds {array.dtype} {array.shape}; the "
                        f"manifest expects {ARRAYS[name]} {shape} (altered or foreign file)")
    return array


def open_converted(folder, *, split: int = 0) -> GraphData:
    """Open a converted graph folder memory-mapped (read-only arrays); no row is read yet.

    ``split`` must be 0: a converted graph holds the one split it was converted with.
    """
    folder = Path(folder)
    if split != 0:
        raise DataError(f"converted graph {folder} holds one split (the one it was converted "
                        f"with); split={split} does not exist: convert with --split {split}")
    manifest = read_manifest(folder)
    arrays = {name: _open_array(folder, name, manifest) for name in ARRAYS}
    if int(arrays["indptr"][-1]) != manifest["num_edges"] or int(arrays["indptr"][0]) != 0:
        raise DataError(f"converted graph {folder}: indptr does not span the "
                        f"{manifest['num_edges']} edges (altered file)")
    data = GraphData(*(arrays[name] for name in ("indptr", "indices", "x", "y", "train_mask",
                                                 "val_mask", "test_mask")),
                     name=str(manifest.get("name") or folder.name),
                     num_classes=int(manifest["num_classes"]),
                     node_stats={name: arrays[name] for name in DERIVED}, mapped_from=folder)
    return data


def verify_converted(folder) -> dict:
    """Check every file's size, header and sha256 against the manifest; return the manifest."""
    from partitioning.atomic_files import sha256_file

    folder = Path(folder)
    manifest = read_manifest(folder)
    for name in ARRAYS:
        _open_array(folder, name, manifest)
        entry = manifest["files"][name]
        if sha256_file(folder / entry["file"]) != entry["sha256"]:
            raise DataError(f"converted graph file {folder / entry['file']} fails its sha256 "
                            "checksum (altered or corrupt)")
    return manifest
