"""The heterophilous-graphs npz layout (Platonov et al., 2023): Tolokers, Minesweeper, ...

One ``.npz`` with ``node_features`` (float ``[N, F]``), ``node_labels`` (int ``[N]``), ``edges``
(int ``[E, 2]``, each undirected edge listed once) and ``train_masks``/``val_masks``/
``test_masks`` (bool ``[10, N]``, ten random splits). Loaded as PyG's
``HeterophilousGraphDataset`` does: edges made undirected (both directions, duplicates removed)
and split ``split`` of the ten chosen.
"""

from __future__ import annotations

from pathlib import Path

from gnnscale.data.graph_data import GraphData
from gnnscale.data.npz import open_npz, require
from gnnscale.errors import DataError

HETEROPHILOUS_KEYS = ("node_features", "node_labels", "edges", "train_masks", "val_masks",
                      "test_masks")


def load_heterophilous(path, *, split: int = 0, symmetrize: bool = True,
                       name: str | None = None) -> GraphData:
    """Load a heterophilous-graphs ``.npz`` file; ``split`` picks one of its (usually 10) splits.

    ``symmetrize=False`` keeps each edge once, as listed in the file (a directed graph).
    """
    path = Path(path)
    with open_npz(path) as arrays:
        require(arrays, HETEROPHILOUS_KEYS, path, "heterophilous-graphs")
        x = arrays["node_features"]
        y = arrays["node_labels"]
        edges = arrays["edges"]
        masks = [arrays[k] for k in ("train_masks", "val_masks", "test_masks")]
    if x.ndim != 2 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise DataError(f"{path}: node_features {x.shape} and node_labels {y.shape} do not match")
    if edges.ndim != 2 or edges.shape[1] != 2 or (edges.size and edges.dtype.kind not in "iu"):
        raise DataError(f"{path}: edges must be an integer [E, 2] array, got {edges.shape} "
                        f"{edges.dtype}")
    n = x.shape[0]
    picked = []
    for key, mask in zip(("train_masks", "val_masks", "test_masks"), masks):
        if mask.ndim == 1:
            mask = mask[None, :]
        if mask.ndim != 2 or mask.shape[1] != n:
            raise DataError(f"{path}: {key} must have shape [splits, N={n}], got {mask.shape}")
        if not 0 <= split < mask.shape[0]:
            raise DataError(f"{path} has {mask.shape[0]} splits; split={split} is out of range "
                            f"(use 0..{mask.shape[0] - 1})")
        picked.append(mask[split].astype(bool))
    return GraphData.from_edge_index(edges.T, n, x, y, *picked, name=name or path.stem,
                                     symmetrize=symmetrize).validate()
