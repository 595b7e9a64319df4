"""Edge-cut partitioners: every node is owned by one part; edges between parts are cut."""

from .block import BlockPartitioner
from .metis import MetisPartitioner
from .random import RandomPartitioner

__all__ = ["BlockPartitioner", "MetisPartitioner", "RandomPartitioner"]
