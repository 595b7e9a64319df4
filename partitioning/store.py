"""On-disk partition store: a manifest plus one file per part, so a rank reads only its own part.

Layout of a store directory::

    manifest.json        format, version, graph statistics, method and parameters, per-file
                         sha256 checksums and sizes, feature/label/mask shapes, quality summary
    node_parts.npy       int32 [N] owner (or master) part of every node (for gathering results)
    part-00000.npz ...   one per part (arrays below); uncompressed, loaded with allow_pickle=False

Per-part arrays, edge cut (from :mod:`partitioning.local_view`): ``owned_nodes``, ``halo_nodes``,
``halo_owner``, ``indptr``/``indices`` (local CSR by destination, columns
``[0, n_owned + n_halo)``: owned nodes first, then halo), ``send_counts``, ``send_index``,
``recv_counts``, ``in_degree``, ``out_degree``, ``self_loops``; plus ``x``, ``y`` and
``mask_<name>`` for the owned rows.

Per-part arrays, vertex cut (what ``gnnscale train --partitions`` runs DistGNN's execution on):
``owned_nodes`` (mastered here), ``mirror_nodes`` (present here, mastered elsewhere, ordered by
master then id), ``mirror_owner``, ``indptr``/``indices`` (local CSR of this part's edges over the
local nodes ``owned + mirror``), ``edge_ids`` (positions of those edges in the global CSR),
``in_degree``, ``out_degree`` (global degrees of the local nodes); ``x`` for all local nodes
(masters first; training reads the masters' rows, mirrors get theirs from the master), ``y``
and masks for the owned rows.

Writes are atomic: everything goes into a temporary directory beside the target, each file is
fsynced, the manifest is written last, and the directory is renamed into place; on any failure
the temporary directory is removed and nothing is left at the target.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from .atomic_files import (fsync_dir, install_folder, read_manifest_file, sha256_file,
                           temp_folder_beside, write_synced)
from .base import Partition
from .errors import PartitionError
from .graph import as_csr_graph
from .local_view import PartViewBuilder
from .metrics import part_summary
from .store_parts import edge_cut_part_arrays, vertex_cut_part_arrays

FORMAT = "gnnscale-partition-store"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
NODE_PARTS = "node_parts.npy"

__all__ = ["FORMAT_VERSION", "write_store", "read_part", "read_manifest", "validate_store",
           "part_file_name", "check_target"]


def part_file_name(part: int) -> str:
    """File name of ``part`` inside a store."""
    return f"part-{part:05d}.npz"


def _check_rows(name: str, array, num_nodes: int) -> np.ndarray | None:
    if array is None:
        return None
    if hasattr(array, "detach"):
        array = array.detach().cpu().numpy()
    array = np.asarray(array)
    if array.ndim == 0 or array.shape[0] != num_nodes:
        raise PartitionError(
            f"{name} has shape {array.shape}: its first dimension must be num_nodes={num_nodes}")
    if array.dtype == object:
        raise PartitionError(f"{name} has dtype object; only numeric arrays can be stored")
    return array


def check_target(out_dir, overwrite: bool = False) -> Path:
    """Refuse a store target that cannot be written (missing or unwritable parent, existing
    folder without ``overwrite``, a non-store folder); return the parent. Cheap: call it before
    long work so a bad ``--out`` fails at once."""
    out_dir = Path(out_dir).absolute()
    parent = out_dir.parent
    if not parent.is_dir():
        raise PartitionError(f"cannot write store {out_dir}: parent folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PartitionError(f"cannot write store {out_dir}: folder {parent} is not writable")
    if out_dir.exists() and not overwrite:
        raise PartitionError(
            f"store folder {out_dir} already exists; remove it or pass overwrite=True "
            "(--overwrite)")
    if out_dir.exists() and not (out_dir / MANIFEST).is_file():
        raise PartitionError(
            f"refusing to replace {out_dir}: it exists and is not a partition store")
    return parent


def write_store(out_dir, graph, partition: Partition, x=None, y=None, masks=None,
                extra_meta=None, overwrite: bool = False, on_part=None, builder=None) -> dict:
    """Write ``partition`` of ``graph`` (with optional node data) as a store at ``out_dir``.

    Args:
        out_dir: target folder; its parent must exist and be writable. It must not exist unless
            ``overwrite`` (then it must be a store, and it is replaced atomically).
        graph: anything :func:`as_csr_graph` accepts.
        partition: an edge-cut or vertex-cut :class:`Partition` of ``graph``.
        x: node features ``[N, ...]`` (numpy or tensor), optional.
        y: labels ``[N, ...]``, optional.
        masks: dict name -> bool ``[N]`` (e.g. ``{"train": ..., "val": ..., "test": ...}``).
        extra_meta: JSON-serialisable dict stored under ``"extra"`` (e.g. the dataset name).
        on_part: called with each part's index once its file is written (progress).
        builder: the edge cut's :class:`~partitioning.local_view.PartViewBuilder` if the caller
            has one (its halos are reused), else one is made.

    An edge cut is written one part at a time from that part's rows (``graph`` and ``x`` may
    be memory-mapped): the peak is about the largest part plus every part's halo ids.
    Returns: the manifest (as written).
    Raises: :class:`PartitionError` on bad input or an unwritable target; nothing is left
        behind on failure.
    """
    out_dir = Path(out_dir).absolute()
    parent = check_target(out_dir, overwrite)
    g = as_csr_graph(graph)
    partition.validate(g)
    n = g.num_nodes
    x = _check_rows("x", x, n)
    y = _check_rows("y", y, n)
    masks = {name: _check_rows(f"mask {name!r}", m, n).astype(bool)
             for name, m in (masks or {}).items() if m is not None}
    for name in masks:
        if not str(name).isidentifier():
            raise PartitionError(f"mask name {name!r} must be a plain identifier")
    try:
        extra = json.loads(json.dumps(extra_meta or {}))
    except (TypeError, ValueError) as exc:
        raise PartitionError(f"extra_meta is not JSON-serialisable: {exc}") from None

    try:
        tmp = temp_folder_beside(out_dir)
    except OSError as exc:
        raise PartitionError(f"cannot write store {out_dir}: {exc.strerror}") from None
    try:
        manifest = _write_files(tmp, graph, g, partition, x, y, masks, extra, on_part, builder)
        install_folder(tmp, out_dir)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise PartitionError(
                f"writing store {out_dir} failed: {exc.strerror or exc} "
                f"({exc.filename or tmp})") from None
        raise
    return manifest


def _write_files(tmp: Path, graph, g, partition: Partition, x, y, masks, extra,
                 on_part=None, builder=None) -> dict:
    own_builder = partition.kind == "edge_cut" and builder is None
    if own_builder:  # its halos serve the summary and the parts
        builder = PartViewBuilder.for_graph(graph, partition.node_parts, partition.num_parts,
                                            spill_dir=tmp)
    try:
        if builder is not None and x is not None:
            builder.spill_rows("x", x)
        return _write_parts(tmp, graph, g, partition, x, y, masks, extra, on_part, builder)
    finally:
        if own_builder:
            builder.close()


def _write_parts(tmp: Path, graph, g, partition: Partition, x, y, masks, extra, on_part,
                 builder) -> dict:
    # the original object for the summary: it may carry a train_mask
    summary = part_summary(graph, partition, builder=builder)
    files = {"node_parts": write_synced(tmp / NODE_PARTS,
                                         lambda fh: np.save(fh, partition.node_parts))}
    parts = []
    if builder is not None:
        part_arrays = edge_cut_part_arrays(g, partition, x, y, masks, builder=builder)
    else:
        part_arrays = vertex_cut_part_arrays(g, partition, x, y, masks)
    for part, arrays in part_arrays:
        entry = write_synced(tmp / part_file_name(part), lambda fh: np.savez(fh, **arrays))
        entry.update(part=part, num_owned=int(arrays["owned_nodes"].size),
                     num_edges=int(arrays["indices"].size))
        parts.append(entry)
        del arrays
        if on_part is not None:
            on_part(part)
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "graph": {"num_nodes": g.num_nodes, "num_edges": g.num_edges},
        "partition": {"kind": partition.kind, "method": partition.method,
                      "params": partition.params, "num_parts": partition.num_parts,
                      "time_s": partition.time_s,
                      "peak_memory_bytes": partition.peak_memory_bytes},
        "data": {"x": _array_meta(x), "y": _array_meta(y), "masks": sorted(masks)},
        "summary": {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                    for k, v in summary.items()},
        "files": files, "parts": parts, "extra": extra,
    }
    write_synced(tmp / MANIFEST,
                  lambda fh: fh.write(json.dumps(manifest, indent=1).encode()))
    fsync_dir(tmp)
    return manifest


def _array_meta(array) -> dict | None:
    if array is None:
        return None
    return {"dtype": str(array.dtype), "row_shape": list(array.shape[1:])}


def read_manifest(store_dir) -> dict:
    """Read and check ``manifest.json`` (format and version) of the store at ``store_dir``."""
    path = Path(store_dir) / MANIFEST
    if not Path(store_dir).is_dir():
        raise PartitionError(f"partition store {store_dir} does not exist")
    manifest = read_manifest_file(path, FORMAT, FORMAT_VERSION, PartitionError,
                                  "gnnscale partition")
    for key in ("graph", "partition", "files", "parts"):
        if key not in manifest:
            raise PartitionError(f"{path} lacks the {key!r} entry")
    return manifest


def _verified(store_dir: Path, entry: dict) -> Path:
    path = store_dir / entry["file"]
    if not path.is_file():
        raise PartitionError(f"store file {path} is missing")
    size = path.stat().st_size
    if size != entry["bytes"]:
        raise PartitionError(
            f"store file {path} has {size} bytes, the manifest says {entry['bytes']} "
            "(truncated or altered)")
    if sha256_file(path) != entry["sha256"]:
        raise PartitionError(f"store file {path} fails its sha256 checksum (altered or corrupt)")
    return path


def read_part(store_dir, part: int, expected_num_parts: int | None = None) -> dict:
    """Arrays of one part (verifying the checksum of that part's file only).

    Args:
        store_dir: the store folder.
        part: part (rank) to read.
        expected_num_parts: the number of ranks started; refused if it differs from the store's.
    Returns: dict name -> numpy array (see the module docstring for the names).
    """
    store_dir = Path(store_dir)
    manifest = read_manifest(store_dir)
    num_parts = manifest["partition"]["num_parts"]
    if expected_num_parts is not None and expected_num_parts != num_parts:
        raise PartitionError(
            f"store {store_dir} has {num_parts} parts but {expected_num_parts} ranks were "
            f"started; run with {num_parts} ranks or re-partition")
    if isinstance(part, bool) or not isinstance(part, (int, np.integer)) \
            or not 0 <= part < num_parts:
        raise PartitionError(f"part {part!r} is out of range for a store of {num_parts} parts")
    entry = manifest["parts"][int(part)]
    path = _verified(store_dir, entry)
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (OSError, ValueError) as exc:
        raise PartitionError(f"store file {path} cannot be read: {exc}") from None


def validate_store(store_dir) -> dict:
    """Check every file's checksum and the parts' mutual consistency; return a summary dict.

    Checks: every node owned by exactly one part and in agreement with ``node_parts.npy``;
    edges add up to the graph's; for an edge cut, what part ``p`` sends to ``q`` matches what
    ``q`` expects from ``p``.
    """
    store_dir = Path(store_dir)
    manifest = read_manifest(store_dir)
    graph, meta = manifest["graph"], manifest["partition"]
    num_parts, n = meta["num_parts"], graph["num_nodes"]
    node_parts = np.load(_verified(store_dir, manifest["files"]["node_parts"]),
                         allow_pickle=False)
    if node_parts.shape != (n,):
        raise PartitionError(f"{store_dir / NODE_PARTS} has shape {node_parts.shape}, "
                             f"expected ({n},)")
    owned_count = np.zeros(n, dtype=np.int64)
    send = np.zeros((num_parts, num_parts), dtype=np.int64)
    recv = np.zeros((num_parts, num_parts), dtype=np.int64)
    edges, total_bytes = 0, sum(e["bytes"] for e in manifest["files"].values())
    for p in range(num_parts):
        arrays = read_part(store_dir, p)
        total_bytes += manifest["parts"][p]["bytes"]
        owned = arrays["owned_nodes"]
        if np.any(node_parts[owned] != p):
            raise PartitionError(f"{store_dir / part_file_name(p)} lists nodes owned by another "
                                 "part in node_parts.npy")
        owned_count[owned] += 1
        edges += arrays["indices"].size
        if meta["kind"] == "edge_cut":
            send[p], recv[p] = arrays["send_counts"], arrays["recv_counts"]
    if np.any(owned_count != 1):
        bad = int(np.flatnonzero(owned_count != 1)[0])
        raise PartitionError(f"store {store_dir}: node {bad} is owned by {owned_count[bad]} parts")
    if edges != graph["num_edges"]:
        raise PartitionError(f"store {store_dir}: parts hold {edges} edges, the graph has "
                             f"{graph['num_edges']}")
    if meta["kind"] == "edge_cut" and not np.array_equal(send, recv.T):
        raise PartitionError(f"store {store_dir}: send and receive counts of the parts disagree")
    return {"store": str(store_dir), "format_version": manifest["format_version"],
            "kind": meta["kind"], "method": meta["method"], "params": meta["params"],
            "num_parts": num_parts, "num_nodes": n, "num_edges": graph["num_edges"],
            "total_bytes": int(total_bytes), "data": manifest.get("data"),
            "summary": manifest.get("summary"), "extra": manifest.get("extra", {}),
            "part_bytes": [e["bytes"] for e in manifest["parts"]], "ok": True}
