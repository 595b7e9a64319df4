"""Edge-cut partitioners: every node is owned by one part; edges between parts are cut."""

from .block import BlockPartitioner
from .kaminpar import KaMinParPartitioner
from .metis import MetisPartitioner
from .random import RandomPartitioner
from .streaming import FennelPartitioner, LDGPartitioner

__all__ = ["BlockPartitioner", "FennelPartitioner", "KaMinParPartitioner", "LDGPartitioner",
           "MetisPartitioner", "RandomPartitioner"]
