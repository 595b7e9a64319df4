"""Contiguous block edge cut: node id ranges of near-equal size."""

from __future__ import annotations

from ..base import Partitioner
from .random import balanced_split


class BlockPartitioner(Partitioner):
    """Split node ids ``0..N-1`` into ``num_parts`` contiguous ranges whose sizes differ by <= 1.

    Good when ids already follow locality (e.g. a graph reordered by METIS or by a space-filling
    curve); otherwise about as bad as random. Deterministic; ``seed`` is accepted and ignored.

    Args:
        num_parts: number of parts.
        seed: unused (default 0), kept for a uniform interface.
    """

    name = "block"
    kind = "edge_cut"
    defaults: dict = {}

    def _partition(self, graph, train_mask):
        return balanced_split(graph.num_nodes, self.num_parts), None
