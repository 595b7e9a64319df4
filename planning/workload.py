"""What each rank of a partitioned graph computes and exchanges: the input of the cost model.

:func:`part_workload` turns a graph and a :class:`~partitioning.base.Partition` into per-part
arrays (NumPy only, so the planner never needs torch):

* ``nodes``: owned (edge cut) or mastered (vertex cut) nodes; ``train_nodes`` of them in the
  training split.
* ``inner_edges`` / ``boundary_edges``: edge cut: in-edges of owned nodes whose source is owned
  (aggregated while the halo travels) or a halo node (aggregated after it arrived). Vertex cut:
  all edges of the part are ``inner_edges`` (``boundary_edges`` are 0), and
  ``vertex_cut_edges[b, p]`` splits them into the four blocks its aggregation multiplies
  (``b``: masters <- masters, masters <- mirrors, mirrors <- masters, mirrors <- mirrors, by
  whether the edge's destination and source are mastered on ``p``).
* ``recv_rows[p, q]``: rows part ``p`` receives from part ``q`` per exchange (its halo rows owned
  by ``q``, or its mirrors mastered by ``q``: the nodes of ``p``'s edges mastered by ``q``).
  ``recv_rows[p].sum()`` is the part's halo, on a vertex cut its mirrors, so ``nodes +
  recv_rows.sum(1)`` are a vertex cut's local rows (masters, then mirrors: the rows its local
  product writes).
* ``computed_rows[k, p]``, ``computed_inner_edges[k, p]``, ``computed_boundary_edges[k, p]``
  (with a training split only): the rows a training step computes ``k`` layers below the
  last and the inner and boundary in-edges their aggregation reads. The last layer computes
  only the loss's rows (``k = 0``: the training nodes). Edge cut: each layer below only the
  rows the layer above reads: those rows, their owned in-neighbours and every row sent to
  another part (``LocalGraph.rows_read_by``); ``NARROWED_LEVELS`` levels are counted, the
  layers below them compute every row. Vertex cut: one level, the loss's rows selected from
  an aggregation of every master over every edge of the part (``VertexCutGraph`` cannot
  narrow its input); the layers below compute every master.
* ``boundary_rows[p]`` and ``computed_boundary_rows[k, p]`` (edge cut): the owned rows with a
  boundary in-edge, the rows the boundary product adds into, of every row and of the rows
  computed at each level.

:func:`host_sharing` counts, for parts placed ``ranks_per_host`` to a host in order, how many of
the rows a host's ranks fetch from other hosts are fetched by more than one of them: what a
host-aware exchange (each host fetches each remote row once and shares it in shared memory)
would save.
"""

from __future__ import annotations

import numpy as np

from partitioning.base import get_train_mask
from partitioning.graph import as_csr_graph

__all__ = ["part_workload", "workload_from_arrays", "host_sharing", "gather_share",
           "NARROWED_LEVELS"]

NARROWED_LEVELS = 3  # layers below the last whose narrowed rows part_workload counts


def part_workload(graph, partition) -> dict:
    """Per-part work and the part-to-part halo matrix of ``partition`` on ``graph``."""
    g = as_csr_graph(graph)
    partition.validate(g)
    p = partition.num_parts
    owner = partition.node_parts
    nodes = np.bincount(owner, minlength=p)
    src, dst = g.edge_index()
    blocks = None
    if partition.kind == "vertex_cut":
        part = np.asarray(partition.edge_parts, dtype=np.int64)
        inner = np.bincount(part, minlength=p)
        boundary = np.zeros(p, dtype=np.int64)
        block = 2 * (owner[dst] != part) + (owner[src] != part)
        blocks = np.bincount(block * p + part, minlength=4 * p).reshape(4, p)
    else:
        dst_part = owner[dst]
        crossing = owner[src] != dst_part
        boundary = np.bincount(dst_part[crossing], minlength=p)
        inner = np.bincount(dst_part, minlength=p) - boundary
    coo = partition.presence(g).tocoo()
    foreign = owner[coo.row] != coo.col
    recv = np.bincount(coo.col[foreign].astype(np.int64) * p + owner[coo.row[foreign]],
                       minlength=p * p).reshape(p, p)
    mask = get_train_mask(graph, g.num_nodes)
    train = np.bincount(owner[mask], minlength=p) if mask is not None else np.zeros(p)
    computed = boundary_rows = computed_boundary_rows = None
    if partition.kind == "vertex_cut" and mask is not None:
        computed = ([train], [inner], [boundary])
    if partition.kind != "vertex_cut":
        with_boundary = np.zeros(g.num_nodes, dtype=bool)
        with_boundary[dst[crossing]] = True
        boundary_rows = np.bincount(owner[with_boundary], minlength=p)
        if mask is not None:
            *computed, computed_boundary_rows = _narrowed_rows(
                owner, src, dst, crossing, with_boundary, np.asarray(mask, dtype=bool), p)
    reader = partition.edge_parts if partition.kind == "vertex_cut" else owner[dst]
    return workload_from_arrays(partition.kind, nodes, inner, boundary, recv, train,
                                num_nodes=g.num_nodes, num_edges=g.num_edges,
                                computed=computed,
                                gather_share=gather_share(reader, src, g.num_nodes, p),
                                vertex_cut_edges=blocks, boundary_rows=boundary_rows,
                                computed_boundary_rows=computed_boundary_rows)


def gather_share(part_of_edge: np.ndarray, src: np.ndarray, num_nodes: int,
                 num_parts: int) -> np.ndarray:
    """``[parts, levels]``: the share of part ``p``'s aggregation reads (one per edge it
    aggregates, of the edge's source row) that go to its ``2**j`` most-read rows, for ``j =
    0 .. levels - 1`` (the last level: every row it reads, share 1). The time model takes the
    rows that fit a rank's cache share to be its most-read ones, so a graph whose reads
    crowd onto few rows (power-law hubs) gathers mostly from the cache where uniformly spread
    reads would not (:func:`planning.cost_model.predict`)."""
    keys = part_of_edge.astype(np.int64) * int(num_nodes) + src
    pairs, reads = np.unique(keys, return_counts=True)
    part = pairs // int(num_nodes)
    most = int(np.bincount(part, minlength=num_parts).max()) if part.size else 1
    levels = int(np.ceil(np.log2(max(2, most)))) + 1
    share = np.ones((num_parts, levels))
    order = np.lexsort((-reads, part))  # each part's rows, most read first
    reads, part = reads[order], part[order]
    starts = np.searchsorted(part, np.arange(num_parts))
    ends = np.searchsorted(part, np.arange(num_parts), side="right")
    for q in range(num_parts):
        counts = np.cumsum(reads[starts[q]:ends[q]], dtype=np.float64)
        if counts.size:
            top = np.minimum(2 ** np.arange(levels), counts.size) - 1
            share[q] = counts[top] / counts[-1]
    return share


def _narrowed_rows(owner: np.ndarray, src: np.ndarray, dst: np.ndarray, crossing: np.ndarray,
                   with_boundary: np.ndarray, loss_rows: np.ndarray, p: int) -> tuple:
    """``(rows, inner edges, boundary edges, rows with a boundary edge)``, each
    ``[NARROWED_LEVELS, p]``: what each part computes at each level below the last layer (see
    the module docstring). ``crossing``: per edge, whether its source is another part's;
    ``with_boundary``: per node, whether it has such an in-edge."""
    sent = np.zeros(owner.size, dtype=bool)
    sent[src[crossing]] = True  # read by another part's halo: computed at every level below
    inner_src, inner_dst = src[~crossing], dst[~crossing]
    dst_part = owner[dst]
    chosen = loss_rows.copy()
    rows, inner, boundary, boundary_rows = [], [], [], []
    for level in range(NARROWED_LEVELS):
        if level:
            below = chosen | sent
            below[inner_src[chosen[inner_dst]]] = True
            chosen = below
        reading = chosen[dst]
        rows.append(np.bincount(owner[chosen], minlength=p))
        inner.append(np.bincount(dst_part[reading & ~crossing], minlength=p))
        boundary.append(np.bincount(dst_part[reading & crossing], minlength=p))
        boundary_rows.append(np.bincount(owner[chosen & with_boundary], minlength=p))
    return np.array(rows), np.array(inner), np.array(boundary), np.array(boundary_rows)


def workload_from_arrays(kind: str, nodes, inner_edges, boundary_edges, recv_rows,
                         train_nodes=None, num_nodes: int | None = None,
                         num_edges: int | None = None, computed: tuple | None = None,
                         gather_share=None, vertex_cut_edges=None, boundary_rows=None,
                         computed_boundary_rows=None) -> dict:
    """Assemble a workload dict from per-part arrays (for tests and hand-made scenarios).

    ``computed``: optional ``(rows, inner edges, boundary edges)``, each ``[levels, parts]``,
    what a training step computes at each level below the last layer (see the module
    docstring); without it the model takes every layer as computing every row.
    ``gather_share``: optional ``[parts, levels]`` (:func:`gather_share`); without it the
    model takes a part's reads as spread over every row it reads.
    ``vertex_cut_edges``: optional ``[4, parts]``, a vertex cut's edges by block (see the
    module docstring); without it the model overlaps none of its products with its
    exchanges. ``boundary_rows`` (``[parts]``) and ``computed_boundary_rows`` (``[levels,
    parts]``): optional, an edge cut's rows with a boundary in-edge (see the module
    docstring); without them the model takes the boundary product to add into as many rows
    as it has edges, every row at most."""
    nodes = np.asarray(nodes, dtype=np.float64)
    recv = np.asarray(recv_rows, dtype=np.float64).reshape(nodes.size, nodes.size)
    train = np.zeros_like(nodes) if train_nodes is None else np.asarray(train_nodes, np.float64)
    inner = np.asarray(inner_edges, dtype=np.float64)
    boundary = np.asarray(boundary_edges, dtype=np.float64)
    work = {"kind": kind, "num_parts": int(nodes.size), "nodes": nodes, "inner_edges": inner,
            "boundary_edges": boundary, "recv_rows": recv, "train_nodes": train,
            "num_nodes": int(num_nodes if num_nodes is not None else nodes.sum()),
            "num_edges": int(num_edges if num_edges is not None else (inner + boundary).sum())}
    if computed is not None:
        for key, values in zip(("computed_rows", "computed_inner_edges",
                                "computed_boundary_edges"), computed):
            values = np.asarray(values, dtype=np.float64)
            if values.ndim != 2 or values.shape[1] != nodes.size:
                raise ValueError(f"{key} must be [levels, {nodes.size}], got shape "
                                 f"{values.shape}")
            work[key] = values
    if gather_share is not None:
        share = np.asarray(gather_share, dtype=np.float64)
        if share.ndim != 2 or share.shape[0] != nodes.size:
            raise ValueError(f"gather_share must be [{nodes.size}, levels], got shape "
                             f"{share.shape}")
        work["gather_share"] = share
    if vertex_cut_edges is not None:
        blocks = np.asarray(vertex_cut_edges, dtype=np.float64)
        if kind != "vertex_cut" or blocks.shape != (4, nodes.size) or \
                not np.allclose(blocks.sum(0), inner):
            raise ValueError(f"vertex_cut_edges must be a vertex cut's [4, {nodes.size}] "
                             f"edges by block, summing to inner_edges; got shape "
                             f"{blocks.shape} for a {kind}")
        work["vertex_cut_edges"] = blocks
    for key, values, ndim in (("boundary_rows", boundary_rows, 1),
                              ("computed_boundary_rows", computed_boundary_rows, 2)):
        if values is None:
            continue
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != ndim or values.shape[-1] != nodes.size:
            raise ValueError(f"{key} must have {ndim} dimension(s), the last of {nodes.size} "
                             f"parts; got shape {values.shape}")
        work[key] = values
    return work


def host_sharing(graph, partition, ranks_per_host: int) -> dict:
    """Rows crossing hosts per exchange, as each rank fetches them and as each host would.

    Parts ``ranks_per_host * h`` to ``ranks_per_host * (h + 1) - 1`` run on host ``h`` (the
    order :class:`planning.cost_model.Cluster` places ranks in). A row crosses hosts where a
    part holds a replica (halo node or mirror) of a node owned (mastered) on another host.
    Returns per host (arrays of length ``hosts``):

    * ``fetched_rows``: replicas the host's ranks receive from other hosts, each rank its own
      (``recv_rows`` summed over the host's ranks and the other hosts' parts);
    * ``unique_rows``: distinct nodes among them (one fetch per host and node);
    * ``sent_rows`` / ``unique_sent_rows``: the same counted at the owning host (rows it sends
      to other hosts' ranks, and to other hosts once per host and node);

    and ``ranks_per_host`` and ``hosts``. ``fetched_rows - unique_rows`` is what a host-aware
    exchange saves.
    """
    g = as_csr_graph(graph)
    partition.validate(g)
    if int(ranks_per_host) < 1:
        raise ValueError(f"ranks_per_host must be >= 1, got {ranks_per_host!r}")
    per_host = int(ranks_per_host)
    hosts = -(-partition.num_parts // per_host)
    owner_host = np.asarray(partition.node_parts, dtype=np.int64) // per_host
    coo = partition.presence(g).tocoo()
    node = coo.row.astype(np.int64)
    host = coo.col.astype(np.int64) // per_host
    remote = owner_host[node] != host
    node, host = node[remote], host[remote]
    fetched = np.bincount(host, minlength=hosts)
    sent = np.bincount(owner_host[node], minlength=hosts)
    pairs = np.unique(node * hosts + host)
    unique_node, unique_host = pairs // hosts, pairs % hosts
    return {"ranks_per_host": per_host, "hosts": hosts,
            "fetched_rows": fetched, "unique_rows": np.bincount(unique_host, minlength=hosts),
            "sent_rows": sent,
            "unique_sent_rows": np.bincount(owner_host[unique_node], minlength=hosts)}
