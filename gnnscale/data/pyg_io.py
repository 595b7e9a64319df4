"""The arrays of a PyTorch Geometric ``Data`` object, checked: what ``GraphData.from_pyg`` builds
from (the reverse is ``GraphData.to_pyg``)."""

from __future__ import annotations

import numpy as np

from gnnscale.errors import DataError


def _numpy(value):
    if value is None:
        return None
    import torch

    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided:  # sparse features (e.g. NELL) become dense
            value = value.to_dense()
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _pick_split(mask, field: str, split: int, name: str):
    """Several splits come as an ``[N, S]`` mask (heterophilous graphs): take column ``split``."""
    if mask is None or mask.ndim == 1:
        return mask
    if mask.ndim == 2 and 0 <= split < mask.shape[1]:
        return mask[:, split]
    raise DataError(f"PyG data {name!r}: {field} has shape {mask.shape}; cannot take split "
                    f"{split} (splits are the columns of an [N, S] mask)")


def pyg_arrays(data, name: str = "graph", *, split: int = 0) -> tuple:
    """``(edge_index, num_nodes, x, y, train_mask, val_mask, test_mask)`` of a
    ``torch_geometric.data.Data`` as NumPy arrays, for ``GraphData.from_edge_index``.

    Reads ``edge_index`` (``[2, E]``, source row first), ``x`` (dense or sparse; one-dimensional
    becomes one column), ``y`` (a one-dimensional class vector; ``[N, 1]`` is flattened) and
    ``train_mask``/``val_mask``/``test_mask``; ``[N, S]`` masks hold several splits and column
    ``split`` is taken. Missing ``x``, ``y`` or masks raise :class:`DataError`.
    """
    if not hasattr(data, "edge_index"):
        raise DataError(f"from_pyg expects a torch_geometric.data.Data, got {type(data).__name__}")
    num_nodes = data.num_nodes
    if num_nodes is None:
        raise DataError(f"PyG data {name!r} does not know its number of nodes; set data.num_nodes")
    edge_index = _numpy(data.edge_index)
    if edge_index is None:
        edge_index = np.zeros((2, 0), dtype=np.int64)
    fields = {}
    for field in ("x", "y", "train_mask", "val_mask", "test_mask"):
        value = _numpy(getattr(data, field, None))
        if value is None:
            raise DataError(f"PyG data {name!r} has no {field}; GraphData needs features, labels "
                            "and train/val/test masks")
        fields[field] = value
    y = fields["y"]
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise DataError(f"PyG data {name!r}: y has shape {y.shape}; only single-label node "
                        "classification (one class id per node) is supported")
    if y.dtype.kind not in "iub":
        raise DataError(f"PyG data {name!r}: y has dtype {y.dtype}; expected integer class ids")
    x = fields["x"]
    if x.ndim == 1:
        x = x[:, None]
    masks = [_pick_split(fields[f], f, split, name) for f in ("train_mask", "val_mask",
                                                               "test_mask")]
    return (edge_index, num_nodes, x, y, *masks)
