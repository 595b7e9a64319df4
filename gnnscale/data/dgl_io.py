"""DGL interop: ``from_dgl(graph)`` and ``to_dgl(data)``; ``dgl`` is imported only when used.

DGL's newest release on PyPI (2.1.0) needs torch <= 2.2.1, so it is not installed next to
gnnscale's default torch; these functions raise :class:`DataError` with an install hint when
``import dgl`` fails. Node data use DGL's built-in dataset names: ``feat``, ``label``,
``train_mask``, ``val_mask``, ``test_mask`` (``x``/``features`` and ``y``/``labels`` are also
read). Edges keep DGL's edge-id order within each destination; CSR order comes back out.
"""

from __future__ import annotations

import numpy as np

from gnnscale.data.graph_data import GraphData
from gnnscale.errors import DataError

_FEATURE_KEYS = ("feat", "x", "features")
_LABEL_KEYS = ("label", "y", "labels")
_MASK_KEYS = ("train_mask", "val_mask", "test_mask")


def import_dgl():
    """Import and return ``dgl``, or raise :class:`DataError` saying how to get it."""
    try:
        import dgl
    except Exception as exc:  # ImportError, or DGL failing against this torch build
        raise DataError(f"DGL interop needs the 'dgl' package, which failed to import "
                        f"({type(exc).__name__}: {exc}); install dgl 2.1 in an environment "
                        "with torch <= 2.2.1") from None
    return dgl


def _tensor_to_numpy(value):
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)


def from_dgl(graph, name: str = "graph", *, split: int = 0) -> GraphData:
    """Build a validated :class:`GraphData` from a homogeneous ``dgl.DGLGraph``.

    Reads features (``feat``/``x``/``features``), labels (``label``/``y``/``labels``) and the
    three masks from ``graph.ndata``; ``[N, S]`` masks hold several splits, column ``split`` is
    taken. Edge direction is kept (DGL datasets already store both directions).
    """
    import_dgl()
    if len(getattr(graph, "ntypes", ["_N"])) != 1 or len(getattr(graph, "etypes", ["_E"])) != 1:
        raise DataError(f"DGL graph {name!r} is heterogeneous (node types {graph.ntypes}, edge "
                        f"types {graph.etypes}); convert it with dgl.to_homogeneous first")
    src, dst = (_tensor_to_numpy(t) for t in graph.edges(order="eid"))
    ndata = graph.ndata
    found = {}
    for role, keys in (("features", _FEATURE_KEYS), ("labels", _LABEL_KEYS)):
        key = next((k for k in keys if k in ndata), None)
        if key is None:
            raise DataError(f"DGL graph {name!r} has no node {role} (looked for ndata keys "
                            f"{', '.join(keys)}; it has {', '.join(ndata.keys()) or 'none'})")
        found[role] = _tensor_to_numpy(ndata[key])
    masks = []
    for key in _MASK_KEYS:
        if key not in ndata:
            raise DataError(f"DGL graph {name!r} has no ndata[{key!r}]")
        mask = _tensor_to_numpy(ndata[key]).astype(bool)
        if mask.ndim == 2:
            if not 0 <= split < mask.shape[1]:
                raise DataError(f"DGL graph {name!r}: {key} has {mask.shape[1]} splits; "
                                f"split={split} is out of range")
            mask = mask[:, split]
        masks.append(mask)
    labels = found["labels"]
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    x = found["features"]
    if x.ndim == 1:
        x = x[:, None]
    return GraphData.from_edge_index(np.stack([src, dst]), graph.num_nodes(), x, labels,
                                     *masks, name=name).validate()


def to_dgl(data: GraphData):
    """Return a ``dgl.DGLGraph`` with the edges of ``data`` (CSR order) and its node data.

    ``ndata`` gets ``feat`` (float32), ``label`` (int64), ``train_mask``, ``val_mask`` and
    ``test_mask`` (bool), the names DGL's built-in datasets use.
    """
    dgl = import_dgl()
    import torch

    src, dst = data.edge_index()
    graph = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=data.num_nodes)
    graph.ndata["feat"] = torch.from_numpy(np.ascontiguousarray(data.x))
    graph.ndata["label"] = torch.from_numpy(np.ascontiguousarray(data.y))
    for key in _MASK_KEYS:
        graph.ndata[key] = torch.from_numpy(np.ascontiguousarray(getattr(data, key)))
    return graph
