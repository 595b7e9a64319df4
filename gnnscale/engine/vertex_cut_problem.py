"""A :class:`LocalProblem` on a vertex-cut partition (DistGNN's cd-0 execution)."""

from __future__ import annotations

import numpy as np
import torch

from partitioning.vertex_cut.parts import vertex_cut_part

from ..comm import Communicator
from ..errors import UsageError
from ..graph.vertex_cut import VertexCutGraph
from .local_problem import LocalProblem

# What VertexCutGraph reads: the arrays vertex_cut_part builds, under a vertex-cut store's names.
VERTEX_CUT_FIELDS = ("owned_nodes", "mirror_nodes", "mirror_owner", "indptr", "indices")


def vertex_cut_problem_from_arrays(arrays: dict, x, y, masks: dict, comm: Communicator,
                                   num_classes: int, dtype=torch.float32,
                                   device="cpu") -> LocalProblem:
    """Build from one part's vertex-cut arrays and its masters' rows of x, y and the masks."""
    graph = VertexCutGraph(arrays, comm, dtype=dtype, device=device)
    return LocalProblem.from_local_graph(graph, x, y, masks, comm, num_classes, dtype=dtype,
                                         device=device)


def vertex_cut_store_view(arrays: dict, where: str) -> tuple[dict, np.ndarray]:
    """The part of a vertex-cut store file that :class:`VertexCutGraph` needs, and the masters'
    feature rows (local: no communication).

    A store part holds the same graph arrays as :func:`vertex_cut_part` builds in memory, plus
    ``in_degree``/``out_degree``; the graph reads neither those nor ``edge_ids`` (it assembles
    degrees and self-loop counts at set-up, the same way for both sources). The store's ``x``
    covers every local node, masters first then mirrors; training needs the masters' rows only
    (mirrors get theirs from the master each layer), so those are kept. ``where`` names the file
    in errors.
    """
    missing = [name for name in VERTEX_CUT_FIELDS if name not in arrays]
    if missing:
        raise UsageError(f"{where} lacks the vertex-cut arrays {', '.join(missing)}; "
                         f"re-create the store with `gnnscale partition`")
    view = {name: arrays[name] for name in VERTEX_CUT_FIELDS}
    num_owned, num_mirrors = int(view["owned_nodes"].size), int(view["mirror_nodes"].size)
    num_local = num_owned + num_mirrors
    if view["mirror_owner"].shape != (num_mirrors,) or view["indptr"].shape != (num_local + 1,):
        raise UsageError(f"{where}: mirror_owner has shape {view['mirror_owner'].shape} and "
                         f"indptr {view['indptr'].shape} for {num_owned} masters and "
                         f"{num_mirrors} mirrors (expected ({num_mirrors},) and "
                         f"({num_local + 1},)); re-create the store")
    x = arrays["x"]
    if x.ndim != 2 or x.shape[0] not in (num_owned, num_local):
        raise UsageError(f"{where}: x has shape {x.shape}, expected {num_local} (all local "
                         f"nodes) or {num_owned} (masters) rows; re-create the store")
    for name in ("y", "mask_train", "mask_val", "mask_test"):
        if arrays[name].shape[:1] != (num_owned,):
            raise UsageError(f"{where}: {name} has shape {arrays[name].shape} for {num_owned} "
                             f"masters; re-create the store")
    # a copy, so the mirrors' rows are freed with the file's arrays rather than kept as its base
    return view, x[:num_owned].copy() if x.shape[0] != num_owned else x


def vertex_cut_problem(data, node_parts: np.ndarray, edge_parts: np.ndarray,
                       comm: Communicator, dtype=torch.float32, device="cpu") -> LocalProblem:
    """Every rank holds the whole ``GraphData`` and keeps its edges and masters (collective)."""
    arrays = vertex_cut_part(data, node_parts, edge_parts, comm.rank)
    owned = arrays["owned_nodes"]
    masks = {"train": data.train_mask[owned], "val": data.val_mask[owned],
             "test": data.test_mask[owned]}
    return vertex_cut_problem_from_arrays(arrays, data.x[owned], data.y[owned], masks, comm,
                                          data.num_classes, dtype=dtype, device=device)


def broadcast_vertex_cut_problem(data, partition, comm: Communicator, dtype=torch.float32,
                                 device="cpu") -> LocalProblem:
    """Rank 0's vertex-cut ``partition`` (None elsewhere) to every rank, then each builds its
    part (collective; every rank holds the whole ``data``)."""
    arrays = []
    for name, size in (("node_parts", data.num_nodes), ("edge_parts", len(data.indices))):
        local = torch.from_numpy(getattr(partition, name).astype(np.int64)) \
            if comm.rank == 0 else torch.empty(size, dtype=torch.int64)
        arrays.append(comm.broadcast(local, root=0).numpy())
    return vertex_cut_problem(data, arrays[0], arrays[1], comm, dtype=dtype, device=device)
