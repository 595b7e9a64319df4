"""Turn a whole graph plus a partition into the part this rank trains on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from partitioning.local_view import PartView, build_part_view

from ..comm import Communicator
from ..graph import LocalGraph

SPLITS = ("train", "val", "test")


@dataclass
class LocalProblem:
    """This rank's graph, features, labels and masks, plus global facts every rank agrees on."""

    graph: LocalGraph
    x: torch.Tensor            # [num_owned, F]
    y: torch.Tensor            # [num_owned] int64
    masks: dict                # split -> bool [num_owned]
    num_features: int
    num_classes: int
    global_counts: dict        # split -> number of nodes in the split over all ranks

    @classmethod
    def from_part_arrays(cls, view: PartView, x, y, masks: dict, comm: Communicator,
                         num_classes: int, dtype=torch.float32, device="cpu") -> "LocalProblem":
        """Build from a part view and this part's own rows of x, y and the masks."""
        graph = LocalGraph(view, comm, dtype=dtype, device=device)
        torch_masks = {s: torch.from_numpy(np.asarray(masks[s], dtype=bool)).to(device)
                       for s in SPLITS}
        local_counts = torch.tensor([float(torch_masks[s].sum()) for s in SPLITS],
                                    dtype=torch.float64)
        global_counts = comm.allreduce(local_counts)
        x = torch.from_numpy(np.ascontiguousarray(x)).to(device=device, dtype=dtype)
        return cls(graph=graph, x=x, y=torch.from_numpy(np.asarray(y, np.int64)).to(device),
                   masks=torch_masks, num_features=int(x.shape[1]), num_classes=int(num_classes),
                   global_counts={s: int(c) for s, c in zip(SPLITS, global_counts.tolist())})

    @classmethod
    def from_graph_data(cls, data, node_parts: np.ndarray, comm: Communicator,
                        dtype=torch.float32, device="cpu") -> "LocalProblem":
        """Every rank holds the whole ``GraphData`` and keeps only its part (small graphs)."""
        view = build_part_view(data, node_parts, comm.rank, num_parts=comm.size)
        owned = view.owned_nodes
        masks = {"train": data.train_mask[owned], "val": data.val_mask[owned],
                 "test": data.test_mask[owned]}
        return cls.from_part_arrays(view, data.x[owned], data.y[owned], masks, comm,
                                    data.num_classes, dtype=dtype, device=device)
