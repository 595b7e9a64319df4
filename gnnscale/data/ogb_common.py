"""What both OGB layouts share (:mod:`gnnscale.data.ogb`: CSV; :mod:`gnnscale.data.ogb_binary`:
npz): finding the files and split folders, reading a split, building the CSR, and the final
:class:`GraphData`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gnnscale.data._csr import csr_by_destination
from gnnscale.data.csv_table import read_csv_table
from gnnscale.data.features import synthetic_node_data
from gnnscale.data.graph_data import GraphData
from gnnscale.data.node_labels import masks_from_ids
from gnnscale.errors import DataError

_SPLIT_FILES = ("train", "valid", "test")


def find_csv(folder: Path, stem: str) -> Path | None:
    """``<folder>/<stem>.csv.gz`` or ``<folder>/<stem>.csv``, whichever exists (gz first)."""
    for suffix in (".csv.gz", ".csv"):
        if (folder / f"{stem}{suffix}").is_file():
            return folder / f"{stem}{suffix}"
    return None


def is_binary_layout(folder) -> bool:
    """Whether ``folder/raw`` holds ``ogb``'s binary files (``data.npz``, or the heterogeneous
    ``edge_index_dict.npz``) rather than CSV ones."""
    raw = Path(folder) / "raw"
    return (raw / "data.npz").is_file() or (raw / "edge_index_dict.npz").is_file()


def split_schemes(folder) -> list[str]:
    """Names of the split folders under ``<folder>/split`` (sorted)."""
    split_dir = Path(folder) / "split"
    if not split_dir.is_dir():
        return []
    return sorted(d.name for d in split_dir.iterdir() if d.is_dir() and find_csv(d, "train"))


def assemble(folder: Path, indptr, indices, features, y, split_ids, *, name: str | None,
             num_classes: int | None, feature_source: str) -> GraphData:
    """The :class:`GraphData` of an OGB folder from its parts (shared by the CSV and npz layouts).

    ``split_ids``: ``(file, node ids)`` of train, valid and test; ``features=None`` generates
    features (:func:`gnnscale.data.features.synthetic_node_data`).
    """
    num_nodes = len(indptr) - 1
    masks = masks_from_ids([ids for _, ids in split_ids], num_nodes, y,
                           [f"OGB split file {file}" for file, _ in split_ids])
    if features is None:
        classes = int(y.max()) + 1 if y.size and y.max() >= 0 else 1
        features = synthetic_node_data(indptr, indices, num_classes=classes)[0]
    elif features.ndim != 2 or features.shape[0] != num_nodes:
        raise DataError(f"{feature_source} has {features.shape[0]} rows but the graph has "
                        f"{num_nodes} nodes")
    return GraphData(indptr, indices, features, y, *masks,
                     name=name or folder.name.replace("_", "-"),
                     num_classes=num_classes).validate()


def held_while_building(num_edges: int, num_nodes: int, symmetrize: bool) -> int:
    """Bytes of the int64 edge list and the CSR being built from it, held together."""
    return 16 * num_edges + 8 * (num_nodes + 1) + 8 * num_edges * (2 if symmetrize else 1)


def edges_to_csr(src, dst, num_nodes: int, symmetrize: bool, origin):
    """:func:`csr_by_destination` whose errors (an id out of range) name ``origin``."""
    try:
        return csr_by_destination(src, dst, num_nodes, symmetrize=symmetrize)
    except DataError as exc:
        raise DataError(f"{origin}: {exc}") from None


def check_split(split: int) -> None:
    """OGB folders define one split per scheme: anything but ``split=0`` is a DataError."""
    if split != 0:
        raise DataError(f"OGB datasets have one split per scheme; split={split} does not exist "
                        "(pick a scheme with scheme=NAME)")


def read_split(folder: Path, scheme: str | None) -> list[tuple[Path, np.ndarray]]:
    """``(file, node ids)`` of train, valid and test of the chosen (or only) scheme."""
    schemes = split_schemes(folder)
    split_dir = folder / "split"
    if scheme is not None:
        if scheme not in schemes:
            raise DataError(f"OGB folder {folder} has no split scheme {scheme!r} (found: "
                            f"{', '.join(schemes) or 'none'})")
        chosen = split_dir / scheme
    elif len(schemes) == 1:
        chosen = split_dir / schemes[0]
    elif schemes:
        raise DataError(f"OGB folder {folder} has several split schemes ({', '.join(schemes)}); "
                        "choose one with scheme=NAME")
    elif find_csv(split_dir, "train"):
        chosen = split_dir
    else:
        raise DataError(f"OGB folder {folder} has no split/<scheme>/train.csv.gz")
    ids = []
    for kind in _SPLIT_FILES:
        file = find_csv(chosen, kind)
        if file is None:
            raise DataError(f"OGB split folder {chosen} is missing {kind}.csv.gz")
        ids.append((file, read_csv_table(file, np.int64, columns=1).ravel()))
    return ids
