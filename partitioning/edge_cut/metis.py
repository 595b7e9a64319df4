"""METIS edge cut (multilevel k-way, via pymetis) with optional multi-constraint balance."""

from __future__ import annotations

import numpy as np

from ..base import Partitioner
from ..errors import PartitionError
from ..graph import CSRGraph
from .rebalance import rebalance

BALANCE_TARGETS = ("nodes", "edges", "train")


def _metis_adjacency(graph: CSRGraph) -> CSRGraph:
    """Symmetric graph without self loops or duplicates, as METIS requires (the graph itself,
    without a copy, when it already is one)."""
    return graph.undirected_simple()


def constraint_weights(graph: CSRGraph, balance, train_mask) -> np.ndarray:
    """float64 ``[N, C]``: one column per balance target.

    ``nodes``: 1 per node; ``edges``: the node's in-degree (the aggregation work its owner does);
    ``train``: 1 per training node (needs ``train_mask``).
    """
    cols = []
    for target in balance:
        if target == "nodes":
            cols.append(np.ones(graph.num_nodes))
        elif target == "edges":
            cols.append(graph.in_degree().astype(np.float64))
        else:
            if train_mask is None:
                raise PartitionError(
                    "balance target 'train' needs a graph with a train_mask attribute")
            cols.append(train_mask.astype(np.float64))
    return np.stack(cols, axis=1)


def check_balance(balance) -> tuple:
    """Validate a ``balance`` parameter (a target name or a tuple of them); return the tuple."""
    if isinstance(balance, str):
        balance = (balance,)
    try:
        balance = tuple(balance)
    except TypeError:
        balance = (balance,)
    if not balance or any(b not in BALANCE_TARGETS for b in balance) \
            or len(set(balance)) != len(balance):
        raise PartitionError(
            f"balance={balance!r} must be a non-empty tuple of distinct values from "
            f"{BALANCE_TARGETS}")
    return balance


def check_imbalance(imbalance) -> None:
    """Refuse an ``imbalance`` parameter outside (0, 10)."""
    if isinstance(imbalance, (bool, np.bool_)) or not isinstance(imbalance, (int, float)) \
            or not 0 < imbalance < 10:
        raise PartitionError(f"imbalance={imbalance!r} must be a number in (0, 10)")


def combined_vertex_weights(weights: np.ndarray) -> np.ndarray:
    """int64 ``[N]``: one vertex weight for a single-constraint partitioner from ``[N, C]``.

    Each target is scaled to a mean of 10 per node and the targets are summed; +1 keeps every
    weight positive.
    """
    means = np.maximum(weights.mean(axis=0), 1e-12)
    return (np.rint((weights / means).sum(axis=1) * 10) + 1).astype(np.int64)


class MetisPartitioner(Partitioner):
    """METIS multilevel k-way edge cut on the symmetrised graph (self loops dropped).

    Balance: ``balance=("nodes",)`` (default) is METIS's own node balance. With several targets,
    e.g. ``("nodes", "edges", "train")``, each target's weights are normalised to the same total
    and summed into a single METIS vertex weight, then a greedy pass (:mod:`.rebalance`) moves
    nodes until every target is within ``imbalance`` of the mean (best effort on graphs where a
    single node exceeds it).

    Args:
        num_parts: number of parts.
        seed: METIS random seed (default 0); results are deterministic for a seed.
        balance: tuple of ``"nodes"``, ``"edges"``, ``"train"`` (default ``("nodes",)``).
            ``"train"`` needs ``graph.train_mask``.
        imbalance: allowed load excess over the mean, 0.03 = 3% (default 0.03; METIS ufactor 30).
        recursive: use recursive bisection instead of k-way (default False).
    """

    name = "metis"
    kind = "edge_cut"
    defaults = {"balance": ("nodes",), "imbalance": 0.03, "recursive": False}

    def _check_params(self):
        self.method_params["balance"] = check_balance(self.method_params["balance"])
        check_imbalance(self.method_params["imbalance"])

    def _partition(self, graph, train_mask):
        import pymetis  # deferred: importing the package must not require METIS

        balance = self.method_params["balance"]
        imbalance = float(self.method_params["imbalance"])
        weights = constraint_weights(graph, balance, train_mask)
        if self.num_parts == 1:
            return np.zeros(graph.num_nodes, dtype=np.int32), None
        adj = _metis_adjacency(graph)
        vweights = None
        if balance != ("nodes",):
            vweights = combined_vertex_weights(weights)
        options = pymetis.Options(seed=self.seed, ufactor=max(1, int(round(imbalance * 1000))))
        result = pymetis.part_graph(
            self.num_parts, pymetis.CSRAdjacency(adj.indptr, adj.indices), vweights=vweights,
            recursive=bool(self.method_params["recursive"]), options=options)
        node_parts = np.asarray(result.vertex_part, dtype=np.int32)
        if balance != ("nodes",):
            node_parts = rebalance(adj.indptr, adj.indices, node_parts, weights,
                                   self.num_parts, imbalance, self.seed)
        return node_parts, None
