"""Class labels and split masks as the file-based loaders (OGB, PyG npz) find them on disk."""

from __future__ import annotations

import numpy as np

from gnnscale.errors import DataError


def class_ids(labels: np.ndarray, num_nodes: int, where: str) -> np.ndarray:
    """int64 ``[N]`` class ids from labels of shape ``[N]`` or ``[N, 1]``; NaN or -1 -> -1.

    Float labels must be whole non-negative numbers or NaN (OGB writes an unlabelled node's
    label as NaN); integer labels must be >= -1. ``where`` names the file in errors.
    """
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] != 1:
        raise DataError(f"{where} has {labels.shape[1]} label columns; multi-label datasets "
                        "(e.g. ogbn-proteins) are not supported")
    if labels.ndim not in (1, 2):
        raise DataError(f"{where}: labels must have shape [N] or [N, 1], got {labels.shape}")
    labels = labels.reshape(-1)
    if labels.shape[0] != num_nodes:
        raise DataError(f"{where} has {labels.shape[0]} rows but the graph has {num_nodes} nodes")
    if labels.dtype.kind == "b" or labels.dtype.kind not in "iuf":
        raise DataError(f"{where}: labels must be numbers, got dtype {labels.dtype}")
    if labels.dtype.kind == "f":
        labeled = ~np.isnan(labels)
        values = labels[labeled]
        bad = ~np.isfinite(values) | (values != np.floor(values)) | (values < 0)
        if bad.any():
            raise DataError(f"{where} must hold non-negative integer class ids or nan; found "
                            f"{float(values[bad][0])!r}")
        y = np.full(num_nodes, -1, dtype=np.int64)
        y[labeled] = values.astype(np.int64)
        return y
    if labels.size and labels.min() < -1:
        raise DataError(f"{where} must hold class ids >= 0 (or -1 for unlabelled); found "
                        f"{int(labels.min())}")
    return labels.astype(np.int64)


def masks_from_ids(ids_by_split, num_nodes: int, y: np.ndarray, names) -> list[np.ndarray]:
    """Boolean ``[N]`` masks from node-id lists; ids out of range or unlabelled are DataErrors.

    ``names`` label each list in errors (e.g. the split file it came from).
    """
    masks = []
    for ids, name in zip(ids_by_split, names):
        ids = np.asarray(ids).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
            bad = ids.min() if ids.min() < 0 else ids.max()
            raise DataError(f"{name} lists node {int(bad)}, outside [0, {num_nodes})")
        mask = np.zeros(num_nodes, dtype=bool)
        mask[ids] = True
        unlabeled = mask & (y < 0)
        if unlabeled.any():
            raise DataError(f"{name} lists {int(unlabeled.sum())} unlabelled node(s) (label nan "
                            f"or -1, first {int(np.argmax(unlabeled))}); split nodes need labels")
        masks.append(mask)
    return masks
