"""A rank's part of a graph every rank can read (memory-mapped), without holding the whole graph.

Each rank reads only its own rows from the shared arrays, finds its halo from them, and learns
which of its rows the others need by one exchange of halo requests: rank ``p`` sends every owner
``q`` the ascending ids of the ``q``-owned nodes in its halo, which are exactly the rows ``q``
must send ``p`` in every layer. The resulting :class:`~partitioning.local_view.PartView` equals
the one built from the whole graph (tested), so training is unchanged.
"""

from __future__ import annotations

import numpy as np
import torch

from partitioning.local_view import PartViewBuilder

from ..comm import Communicator
from .local_problem import LocalProblem


def exchange_halo_requests(halo: np.ndarray, halo_owner: np.ndarray, comm: Communicator):
    """``(ids, counts)``: the global ids every rank needs from this rank, grouped by the
    requesting rank (ascending), from each rank's ``halo`` ordered by (owner, id)."""
    need = np.bincount(halo_owner, minlength=comm.size).astype(np.int64)
    matrix = comm.allgather(torch.from_numpy(need)).numpy()  # [requester, owner]
    asked = matrix[:, comm.rank].astype(np.int64)
    received = comm.alltoallv(torch.from_numpy(np.ascontiguousarray(halo, dtype=np.int64)),
                              need.tolist(), asked.tolist())
    return received.numpy().astype(np.int64, copy=False), asked


def problem_from_shared_graph(data, node_parts: np.ndarray, comm: Communicator,
                              dtype=torch.float32, device="cpu") -> LocalProblem:
    """Build this rank's :class:`LocalProblem` from a ``GraphData`` whose arrays every rank can
    read (typically memory-mapped from a converted folder), reading only this rank's rows.

    Collective: every rank calls it with the same ``node_parts``.
    """
    builder = PartViewBuilder.for_graph(data, node_parts, comm.size)
    owned, sources = builder.rows(comm.rank)
    halo, halo_owner = builder.halo(comm.rank, sources)
    requests = exchange_halo_requests(halo, halo_owner, comm)
    view = builder.view(comm.rank, requests=requests, rows=(owned, sources))
    del sources
    masks = {"train": data.train_mask[owned], "val": data.val_mask[owned],
             "test": data.test_mask[owned]}
    return LocalProblem.from_part_arrays(view, data.x[owned], data.y[owned], masks, comm,
                                         data.num_classes, dtype=dtype, device=device)
