"""Planetoid raw files: ``ind.<name>.{x,y,tx,ty,allx,ally,graph,test.index}``.

Reads them exactly as PyG's ``torch_geometric.io.read_planetoid_data`` does, but through the
restricted unpickler of :mod:`gnnscale.data.safe_pickle`:

- features ``x = [allx; tx]`` and labels ``argmax([ally; ty])``, with the test rows put back in
  the order of ``test.index``; where the test ids are not consecutive (CiteSeer's 15 isolated
  test nodes) ``tx``/``ty`` are padded with zero rows, which get label 0 and no mask (as in PyG);
- edges from the adjacency dict, self loops removed, duplicates removed (the lists are already
  symmetric, so the graph is undirected);
- the public split: the first ``len(y)`` nodes train, the next 500 validation, ``test.index`` test
  (Cora 140/500/1000, CiteSeer 120/500/1000).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gnnscale.data._csr import csr_by_destination
from gnnscale.data.graph_data import GraphData
from gnnscale.data.safe_pickle import safe_load
from gnnscale.errors import DataError

# Planetoid feature matrices are densified (as PyG does); the largest, CiteSeer's and PubMed's,
# have about 1.2e7 entries. A corrupt header claiming far more is refused, not allocated.
_MAX_DENSE_ELEMENTS = 1 << 27

PLANETOID_PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


def find_planetoid_prefix(folder: Path) -> str | None:
    """The ``<name>`` of the ``ind.<name>.graph`` file in ``folder``, or ``None``."""
    graphs = sorted(folder.glob("ind.*.graph")) if folder.is_dir() else []
    if not graphs:
        return None
    if len(graphs) > 1:
        names = ", ".join(g.name for g in graphs)
        raise DataError(f"Planetoid folder {folder} holds several datasets ({names}); "
                        "point at a folder with one")
    return graphs[0].name[len("ind."):-len(".graph")]


def load_planetoid(folder, name: str | None = None, *, split: int = 0) -> GraphData:
    """Load a Planetoid dataset from ``folder`` (the ``raw`` folder or the folder above it).

    ``name`` is the file prefix (``cora``, ``citeseer``, ``pubmed``); found from the files when
    ``None``. Only the public split exists, so ``split`` must be 0. Raises :class:`DataError` for
    a missing folder or file, a refused or corrupt pickle, or inconsistent arrays.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"Planetoid folder {folder} does not exist")
    if (folder / "raw").is_dir() and not any(folder.glob("ind.*.graph")):
        folder = folder / "raw"
    if split != 0:
        raise DataError(f"Planetoid data has only the public split (split=0), got split={split}")
    prefix = name.lower() if name else find_planetoid_prefix(folder)
    if prefix is None:
        raise DataError(f"Planetoid folder {folder} has no ind.<name>.graph file")
    if prefix.startswith("nell"):
        raise DataError(f"Planetoid dataset {prefix!r} (NELL) is not supported; use cora, "
                        "citeseer or pubmed")
    for part in PLANETOID_PARTS:
        if not (folder / f"ind.{prefix}.{part}").is_file():
            raise DataError(f"Planetoid folder {folder} is missing ind.{prefix}.{part}")
    arrays = {part: _read_part(folder / f"ind.{prefix}.{part}", part) for part in PLANETOID_PARTS}
    return _assemble(arrays, name=_display_name(prefix), origin=folder)


def _display_name(prefix: str) -> str:
    return {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}.get(prefix, prefix)


def _read_part(path: Path, part: str):
    if part == "test.index":
        try:
            tokens = path.read_text(encoding="ascii").split()
            ids = np.array([int(t) for t in tokens], dtype=np.int64)
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise DataError(f"{path} is not a list of integer node ids ({exc})") from None
        if ids.size == 0:
            raise DataError(f"{path} lists no test nodes")
        return ids
    obj = safe_load(path)
    if part == "graph":
        if not isinstance(obj, dict):
            raise DataError(f"{path} should hold a dict of adjacency lists, got "
                            f"{type(obj).__name__}")
        return obj
    if sp.issparse(obj):
        if obj.dtype.kind not in "biuf":
            raise DataError(f"{path} holds a sparse matrix of dtype {obj.dtype}; expected numbers")
        return obj  # densified in _assemble once its shape is checked against the others
    if not isinstance(obj, np.ndarray) or obj.ndim != 2 or obj.dtype.kind not in "biuf":
        raise DataError(f"{path} should hold a 2-D numeric matrix, got "
                        f"{getattr(obj, 'shape', type(obj).__name__)}")
    return obj


def _dense(matrix, origin: Path, part: str) -> np.ndarray:
    rows, cols = matrix.shape
    if rows * cols > _MAX_DENSE_ELEMENTS:
        raise DataError(f"{origin}: ind.*.{part} is a {rows} x {cols} matrix, too large to "
                        "densify; the file is corrupt or not a Planetoid dataset")
    return matrix.toarray() if sp.issparse(matrix) else matrix


def _edges_from_dict(graph: dict, origin: Path):
    try:
        keys = np.fromiter(graph.keys(), dtype=np.int64, count=len(graph))
        lengths = np.fromiter((len(v) for v in graph.values()), dtype=np.int64, count=len(graph))
        dst = np.fromiter((int(u) for v in graph.values() for u in v), dtype=np.int64,
                          count=int(lengths.sum()))
    except (TypeError, ValueError, OverflowError) as exc:
        raise DataError(f"{origin}: adjacency dict must map node ids to lists of node ids "
                        f"({exc})") from None
    return np.repeat(keys, lengths), dst


def _assemble(a: dict, name: str, origin: Path) -> GraphData:
    x, tx, allx, y, ty, ally = (a[k] for k in ("x", "tx", "allx", "y", "ty", "ally"))
    test_index = a["test.index"]
    if tx.shape[0] != test_index.size or ty.shape[0] != test_index.size:
        raise DataError(f"{origin}: tx/ty have {tx.shape[0]}/{ty.shape[0]} rows but test.index "
                        f"lists {test_index.size} nodes")
    if (allx.shape[0] != ally.shape[0] or allx.shape[1] != tx.shape[1]
            or ally.shape[1] != ty.shape[1]):
        raise DataError(f"{origin}: allx {allx.shape}, ally {ally.shape}, tx {tx.shape}, "
                        f"ty {ty.shape} do not fit together")
    allx, tx = _dense(allx, origin, "allx"), _dense(tx, origin, "tx")
    ty, ally = _dense(ty, origin, "ty"), _dense(ally, origin, "ally")
    sorted_test = np.sort(test_index)
    low, high = int(sorted_test[0]), int(sorted_test[-1])
    if low < allx.shape[0] or high - low + 1 > 10 * test_index.size + 1000:
        raise DataError(f"{origin}: test.index ids {low}..{high} do not follow the "
                        f"{allx.shape[0]} rows of allx")
    # Pad tx/ty for non-consecutive test ids (CiteSeer); a no-op for Cora and PubMed.
    span = high - low + 1
    tx_ext = np.zeros((span, tx.shape[1]), dtype=np.float32)
    tx_ext[sorted_test - low] = tx
    ty_ext = np.zeros((span, ty.shape[1]), dtype=ty.dtype)
    ty_ext[sorted_test - low] = ty

    features = np.concatenate([allx.astype(np.float32), tx_ext])
    num_nodes = features.shape[0]
    if high >= num_nodes:
        raise DataError(f"{origin}: test id {high} is beyond the {num_nodes} nodes")
    features[test_index] = features[sorted_test]
    labels = np.concatenate([ally, ty_ext]).argmax(axis=1).astype(np.int64)
    labels[test_index] = labels[sorted_test]

    train_mask = np.zeros(num_nodes, dtype=bool)
    train_mask[: y.shape[0]] = True
    val_mask = np.zeros(num_nodes, dtype=bool)
    val_mask[y.shape[0]: y.shape[0] + 500] = True
    test_mask = np.zeros(num_nodes, dtype=bool)
    test_mask[test_index] = True

    src, dst = _edges_from_dict(a["graph"], origin)
    indptr, indices = csr_by_destination(src, dst, num_nodes, remove_duplicates=True,
                                         remove_self_loops=True)
    num_classes = int(ally.shape[1])
    return GraphData(indptr=indptr, indices=indices, x=features, y=labels,
                     train_mask=train_mask, val_mask=val_mask, test_mask=test_mask,
                     name=name, num_classes=num_classes).validate()
