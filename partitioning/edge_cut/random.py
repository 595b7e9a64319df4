"""Uniform random edge cut: the baseline every other method must beat."""

from __future__ import annotations

import numpy as np

from ..base import Partitioner


def balanced_split(num_items: int, num_parts: int) -> np.ndarray:
    """int32 ``[num_items]``: item ``i`` goes to part ``i * P // n``; part sizes differ by <= 1."""
    return (np.arange(num_items, dtype=np.int64) * num_parts // num_items).astype(np.int32)


class RandomPartitioner(Partitioner):
    """Random balanced edge cut.

    A seeded random permutation of the nodes is split into ``num_parts`` contiguous chunks, so part
    sizes differ by at most one node. Ignores the edges: expect about ``(1 - 1/P)`` of them cut.

    Args:
        num_parts: number of parts.
        seed: seed of the permutation (default 0).
    """

    name = "random"
    kind = "edge_cut"
    defaults: dict = {}

    def _partition(self, graph, train_mask):
        rng = np.random.default_rng(self.seed)
        order = rng.permutation(graph.num_nodes)
        node_parts = np.empty(graph.num_nodes, dtype=np.int32)
        node_parts[order] = balanced_split(graph.num_nodes, self.num_parts)
        return node_parts, None
