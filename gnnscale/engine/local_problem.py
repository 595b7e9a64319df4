"""Turn a whole graph plus a partition into the part this rank trains on."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch

from partitioning.local_view import PartView, PartViewBuilder
from partitioning.mapped_rows import take_rows

from ..comm import Communicator
from ..errors import UsageError
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

    @classmethod
    def from_store(cls, store_dir, comm: Communicator, dtype=torch.float32,
                   device="cpu") -> "LocalProblem":
        """Read only this rank's part of a partition store written by ``gnnscale partition``.

        Collective: every rank must call it. Reading happens first and touches no collective,
        so a caller may wrap :func:`read_store_part` in an agreement block of its own.
        """
        return cls.from_store_part(read_store_part(store_dir, comm.rank, comm.size), comm,
                                   dtype=dtype, device=device)

    @classmethod
    def from_store_part(cls, part: "StorePart", comm: Communicator, dtype=torch.float32,
                        device="cpu") -> "LocalProblem":
        """Build from arrays :func:`read_store_part` returned (collective): a ``LocalGraph``
        for an edge-cut part, a ``VertexCutGraph`` for a vertex-cut part."""
        num_classes = part.num_classes
        if num_classes is None:
            local_max = float(part.y.max()) if part.y.size else -1.0
            num_classes = int(comm.allreduce_scalar(local_max, "max")) + 1
        if part.kind == "vertex_cut":
            from .vertex_cut_problem import vertex_cut_problem_from_arrays

            return vertex_cut_problem_from_arrays(part.view, part.x, part.y, part.masks, comm,
                                                  num_classes, dtype=dtype, device=device)
        return cls.from_part_arrays(part.view, part.x, part.y, part.masks, comm, num_classes,
                                    dtype=dtype, device=device)


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


@dataclass
class StorePart:
    """One rank's arrays from a partition store, before any collective set-up.

    ``view`` is a :class:`PartView` for an edge cut and the dict of vertex-cut arrays
    (:data:`~gnnscale.engine.vertex_cut_problem.VERTEX_CUT_FIELDS`) for a vertex cut; ``x``,
    ``y`` and ``masks`` hold the owned (master) rows in both cases.
    """

    view: "PartView | dict"
    x: np.ndarray
    y: np.ndarray
    masks: dict
    num_classes: int | None
    manifest: dict
    kind: str = "edge_cut"


STORE_KINDS = ("edge_cut", "vertex_cut")


def read_store_part(store_dir, rank: int, num_ranks: int) -> StorePart:
    """Read and check ``rank``'s part of the store (local: no communication)."""
    from partitioning.store import part_file_name, read_manifest, read_part

    manifest = read_manifest(store_dir)
    kind = manifest["partition"]["kind"]
    if kind not in STORE_KINDS:
        raise UsageError(f"partition store {store_dir} holds a {kind!r} partition; training "
                         f"reads {' and '.join(STORE_KINDS)} stores (re-create it with "
                         f"`gnnscale partition`)")
    arrays = read_part(store_dir, rank, expected_num_parts=num_ranks)
    missing = [s for s in ("x", "y", *(f"mask_{s}" for s in SPLITS)) if s not in arrays]
    if missing:
        raise UsageError(f"partition store {store_dir} has no {', '.join(missing)} for its "
                         f"nodes; write it from a dataset with features, labels and masks")
    x = arrays["x"]
    if kind == "vertex_cut":
        from .vertex_cut_problem import vertex_cut_store_view

        where = f"{store_dir}/{part_file_name(rank)}"
        view, x = vertex_cut_store_view(arrays, where)
    else:
        view_fields = {f.name for f in fields(PartView)} - {"part", "num_parts",
                                                            "num_global_nodes"}
        view = PartView(part=rank, num_parts=num_ranks,
                        num_global_nodes=int(manifest["graph"]["num_nodes"]),
                        **{name: arrays[name] for name in view_fields})
    return StorePart(view=view, x=x, y=arrays["y"],
                     masks={s: arrays[f"mask_{s}"] for s in SPLITS},
                     num_classes=(manifest.get("extra") or {}).get("num_classes"),
                     manifest=manifest, kind=kind)
