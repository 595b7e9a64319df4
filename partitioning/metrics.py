"""Quality metrics of a partition: edge cut, replication, halo volume and balance.

Definitions (``P`` parts, edge ``u -> v``):

* edge cut: number of edges whose endpoints are owned by different parts. For a vertex cut the
  master parts (``node_parts``) are used, so the number is comparable with an edge cut's.
* halo of part ``p`` (edge cut): distinct sources ``u`` of edges ``u -> v`` with ``v`` owned by
  ``p`` and ``u`` not; those rows are received from their owners every layer.
  For a vertex cut: the mirrors of ``p``, nodes present in ``p`` (endpoint of one of its edges)
  whose master is another part; their partial aggregates are synchronised with the master.
* replication factor: mean over all nodes of the number of parts a node is present in (owner plus
  halo copies, or master plus mirrors). 1.0 means no replication. Isolated nodes count 1.
* balance of a quantity: max over parts / mean over parts (1.0 is perfect).
"""

from __future__ import annotations

import numpy as np

from .base import Partition, get_train_mask
from .graph import as_csr_graph
from .local_view import PartViewBuilder

__all__ = ["edge_cut", "replication_factor", "halo_counts", "part_summary",
           "format_summary_table"]


def edge_cut(graph, partition: Partition) -> int:
    """Number of edges ``u -> v`` with ``node_parts[u] != node_parts[v]``."""
    g = as_csr_graph(graph)
    partition.validate(g)
    dst_parts = np.repeat(partition.node_parts, g.in_degree())
    return int(np.count_nonzero(partition.node_parts[g.indices] != dst_parts))


def replication_factor(graph, partition: Partition) -> float:
    """Mean number of parts each node is present in (owner/master plus halo copies/mirrors)."""
    return float(partition.presence(graph).nnz / partition.num_nodes)


def halo_counts(graph, partition: Partition) -> np.ndarray:
    """int64 ``[P]``: halo nodes (edge cut) or mirrors (vertex cut) of each part."""
    presence = partition.presence(graph).tocoo()
    foreign = partition.node_parts[presence.row] != presence.col
    return np.bincount(presence.col[foreign], minlength=partition.num_parts).astype(np.int64)


def _balance(values: np.ndarray) -> float:
    mean = float(values.mean()) if values.size else 0.0
    return float(values.max() / mean) if mean > 0 else 1.0


def part_summary(graph, partition: Partition, feature_bytes_per_row: int | None = None,
                 builder=None) -> dict:
    """Per-part loads and the global quality numbers of ``partition`` on ``graph``.

    Returns a dict with per-part int64 arrays ``nodes`` (owned or mastered), ``edges`` (in-edges
    of owned nodes; for a vertex cut, the edges assigned to the part), ``halo_nodes`` and
    ``train_nodes`` (owned training nodes; zeros when ``graph`` has no ``train_mask``),
    ``halo_peers`` (number of parts each part receives halo rows from: its messages per
    exchange), and scalars ``kind``, ``method``, ``num_parts``, ``num_nodes``, ``num_edges``, ``edge_cut``,
    ``edge_cut_fraction``, ``replication_factor``, ``halo_rows_total``, ``balance_nodes``,
    ``balance_edges``, ``balance_train``, ``time_s``, ``peak_memory_bytes``. With
    ``feature_bytes_per_row`` (e.g. ``4 * feature_dim`` for float32) it adds
    ``halo_bytes_max`` and ``halo_bytes_mean``: bytes each part receives per exchange (one layer,
    one direction).

    For an edge cut the halos come from :class:`~partitioning.local_view.PartViewBuilder`
    (pass ``builder`` to reuse one that already computed them), part by part, so the memory
    stays bounded by the largest part on graphs of any size.
    """
    g = as_csr_graph(graph)
    partition.validate(g)
    p = partition.num_parts
    nodes = np.bincount(partition.node_parts, minlength=p).astype(np.int64)
    if partition.kind == "vertex_cut":
        edges = np.bincount(partition.edge_parts, minlength=p).astype(np.int64)
        presence = partition.presence(g)
        coo = presence.tocoo()
        foreign = partition.node_parts[coo.row] != coo.col
        halo = np.bincount(coo.col[foreign], minlength=p).astype(np.int64)
        # distinct (receiving part, owner part) pairs: the peers each part receives rows from
        owners = partition.node_parts[coo.row[foreign]]
        pairs = np.unique(coo.col[foreign].astype(np.int64) * p + owners)
        peers = np.bincount(pairs // p, minlength=p).astype(np.int64)
        cut = edge_cut(g, partition)
        replicas = presence.nnz
    else:  # part by part from each part's own rows: memory bounded by the largest part
        builder = builder if builder is not None else \
            PartViewBuilder(g, partition.node_parts, p)
        halos = builder.halos()
        edges = np.bincount(partition.node_parts, weights=g.in_degree(),
                            minlength=p).astype(np.int64)
        halo = np.array([h.size for h, _ in halos], dtype=np.int64)
        peers = np.array([np.unique(owner).size for _, owner in halos], dtype=np.int64)
        cut = int(builder.cut_edges.sum())
        replicas = g.num_nodes + int(halo.sum())
    train_mask = get_train_mask(graph, g.num_nodes)
    if train_mask is None:
        train = np.zeros(p, dtype=np.int64)
    else:
        train = np.bincount(partition.node_parts[train_mask], minlength=p).astype(np.int64)
    cut = edge_cut(g, partition)
    summary = {
        "kind": partition.kind, "method": partition.method, "num_parts": p,
        "num_nodes": g.num_nodes, "num_edges": g.num_edges,
        "nodes": nodes, "edges": edges, "halo_nodes": halo, "halo_peers": peers,
        "train_nodes": train,
        "edge_cut": cut, "edge_cut_fraction": cut / g.num_edges if g.num_edges else 0.0,
        "replication_factor": float(replicas / g.num_nodes) if g.num_nodes else 1.0,
        "halo_rows_total": int(halo.sum()),
        "balance_nodes": _balance(nodes), "balance_edges": _balance(edges),
        "balance_train": _balance(train),
        "time_s": float(partition.time_s), "peak_memory_bytes": int(partition.peak_memory_bytes),
    }
    if feature_bytes_per_row is not None:
        summary["feature_bytes_per_row"] = int(feature_bytes_per_row)
        summary["halo_bytes_max"] = int(halo.max()) * int(feature_bytes_per_row)
        summary["halo_bytes_mean"] = float(halo.mean()) * int(feature_bytes_per_row)
    return summary


def _fmt_bytes(num: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(num) < 1024 or unit == "GiB":
            return f"{num:.0f} {unit}" if unit == "B" else f"{num:.1f} {unit}"
        num /= 1024
    return f"{num:.1f} GiB"


def format_summary_table(summary: dict, max_rows: int = 16) -> str:
    """Readable text: a per-part table (first and last rows when there are many) and totals."""
    p = summary["num_parts"]
    cols = ("nodes", "edges", "halo_nodes", "train_nodes")
    lines = [f"{'part':>6} " + " ".join(f"{c:>12}" for c in cols)]
    shown = list(range(p)) if p <= max_rows else \
        list(range(max_rows // 2)) + [-1] + list(range(p - max_rows // 2, p))
    for i in shown:
        if i < 0:
            lines.append(f"{'...':>6}")
            continue
        lines.append(f"{i:>6} " + " ".join(f"{int(summary[c][i]):>12d}" for c in cols))
    lines.append(f"{'max/mean':>6} " + " ".join(
        f"{_max_over_mean(summary[c]):>12.3f}" for c in cols))
    lines.append("")
    lines.append(f"method {summary['method']} ({summary['kind']}), {p} parts, "
                 f"{summary['num_nodes']} nodes, {summary['num_edges']} edges")
    lines.append(f"edge cut {summary['edge_cut']} ({100 * summary['edge_cut_fraction']:.1f}% of "
                 f"edges), replication factor {summary['replication_factor']:.3f}, "
                 f"halo rows {summary['halo_rows_total']}")
    lines.append(f"balance: nodes {summary['balance_nodes']:.3f}, edges "
                 f"{summary['balance_edges']:.3f}, train {summary['balance_train']:.3f}")
    if "halo_bytes_max" in summary:
        lines.append(f"halo per exchange ({summary['feature_bytes_per_row']} B/row): max "
                     f"{_fmt_bytes(summary['halo_bytes_max'])}, mean "
                     f"{_fmt_bytes(summary['halo_bytes_mean'])}")
    lines.append(f"partition time {summary['time_s']:.3f} s, peak traced memory "
                 f"{_fmt_bytes(summary['peak_memory_bytes'])}")
    return "\n".join(lines)


def _max_over_mean(values) -> float:
    values = np.asarray(values)
    return _balance(values)
