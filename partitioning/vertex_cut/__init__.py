"""Vertex-cut partitioners: every edge belongs to one part; nodes are replicated where needed."""

from .hdrf import HDRFPartitioner
from .libra import LibraPartitioner

__all__ = ["HDRFPartitioner", "LibraPartitioner"]
