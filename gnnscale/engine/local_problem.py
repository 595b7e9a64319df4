"""Turn a whole graph plus a partition into the part this rank trains on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from partitioning.local_view import PartView, PartViewBuilder
from partitioning.mapped_rows import take_rows

from ..comm import Communicator
from ..graph import LocalGraph, RankGraph

SPLITS = ("train", "val", "test")


@dataclass
class LocalProblem:
    """This rank's graph, features, labels and masks, plus global facts every rank agrees on."""

    graph: RankGraph           # a LocalGraph (edge cut) or a VertexCutGraph (vertex cut)
    x: torch.Tensor            # [num_owned, F]
    y: torch.Tensor            # [num_owned] int64
    masks: dict                # split -> bool [num_owned]
    num_features: int
    num_classes: int
    global_counts: dict        # split -> number of nodes in the split over all ranks

    @classmethod
    def from_local_graph(cls, graph, x, y, masks: dict, comm: Communicator, num_classes: int,
                         dtype=torch.float32, device="cpu") -> "LocalProblem":
        """Wrap an already built graph (edge or vertex cut) with this rank's owned rows of x, y
        and the masks; the global split counts are allreduced here (collective)."""
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
    def from_part_arrays(cls, view: PartView, x, y, masks: dict, comm: Communicator,
                         num_classes: int, dtype=torch.float32, device="cpu") -> "LocalProblem":
        """Build from a part view and this part's own rows of x, y and the masks."""
        graph = LocalGraph(view, comm, dtype=dtype, device=device)
        return cls.from_local_graph(graph, x, y, masks, comm, num_classes, dtype=dtype,
                                    device=device)

    @classmethod
    def from_graph_data(cls, data, node_parts: np.ndarray, comm: Communicator,
                        dtype=torch.float32, device="cpu") -> "LocalProblem":
        """This rank's part of a ``GraphData`` that every rank can read, whole in memory or
        memory-mapped from a converted folder: only this rank's rows are read (collective).

        The halo comes from the rank's own rows; the rows the others need from it come from one
        exchange of halo requests (:func:`exchange_halo_requests`), so no rank scans the whole
        graph. The part equals the one built from the whole graph (tested).
        """
        builder = PartViewBuilder.for_graph(data, node_parts, comm.size)
        owned, sources = builder.rows(comm.rank)
        halo, halo_owner = builder.halo(comm.rank, sources)
        requests = exchange_halo_requests(halo, halo_owner, comm)
        view = builder.view(comm.rank, requests=requests, rows=(owned, sources))
        del sources
        # rows copied out of a mapped file leave no pages mapped in this rank (take_rows)
        masks = {name: take_rows(getattr(data, f"{name}_mask"), owned)
                 for name in ("train", "val", "test")}
        return cls.from_part_arrays(view, take_rows(data.x, owned), take_rows(data.y, owned),
                                    masks, comm, data.num_classes, dtype=dtype, device=device)


def exchange_halo_requests(halo: np.ndarray, halo_owner: np.ndarray, comm: Communicator):
    """``(ids, counts)``: the global ids every rank needs from this rank, grouped by the
    requesting rank (ascending), from each rank's ``halo`` ordered by (owner, id).

    Rank ``p`` sends every owner ``q`` the ascending ids of the ``q``-owned nodes in its halo,
    which are exactly the rows ``q`` must send ``p`` in every layer (collective).
    """
    need = np.bincount(halo_owner, minlength=comm.size).astype(np.int64)
    matrix = comm.allgather(torch.from_numpy(need)).numpy()  # [requester, owner]
    asked = matrix[:, comm.rank].astype(np.int64)
    received = comm.alltoallv(torch.from_numpy(np.ascontiguousarray(halo, dtype=np.int64)),
                              need.tolist(), asked.tolist())
    return received.numpy().astype(np.int64, copy=False), asked
