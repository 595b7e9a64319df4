"""A :class:`LocalProblem` on a vertex-cut partition (DistGNN's cd-0 execution)."""

from __future__ import annotations

import numpy as np
import torch

from ..comm import Communicator
from ..graph.vertex_cut import VertexCutGraph, vertex_cut_part
from .local_problem import SPLITS, LocalProblem


def vertex_cut_problem_from_arrays(arrays: dict, x, y, masks: dict, comm: Communicator,
                                   num_classes: int, dtype=torch.float32,
                                   device="cpu") -> LocalProblem:
    """Build from one part's vertex-cut arrays and its masters' rows of x, y and the masks."""
    graph = VertexCutGraph(arrays, comm, dtype=dtype, device=device)
    torch_masks = {s: torch.from_numpy(np.asarray(masks[s], dtype=bool)).to(device)
                   for s in SPLITS}
    local_counts = torch.tensor([float(torch_masks[s].sum()) for s in SPLITS],
                                dtype=torch.float64)
    global_counts = comm.allreduce(local_counts)
    x = torch.from_numpy(np.ascontiguousarray(x)).to(device=device, dtype=dtype)
    return LocalProblem(graph=graph, x=x, y=torch.from_numpy(np.asarray(y, np.int64)).to(device),
                        masks=torch_masks, num_features=int(x.shape[1]),
                        num_classes=int(num_classes),
                        global_counts={s: int(c) for s, c in zip(SPLITS, global_counts.tolist())})


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
