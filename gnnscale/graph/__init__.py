"""What one rank sees: :class:`LocalGraph`, :class:`HaloPlan`, the halo exchange and aggregation."""

from .aggregate import aggregate
from .halo import CommStats, HaloExchange, HaloPlan, exchange_halo
from .local_graph import NORMALISATIONS, LocalGraph
from .sparse import SparseBlock

__all__ = ["LocalGraph", "HaloPlan", "HaloExchange", "CommStats", "exchange_halo", "aggregate",
           "SparseBlock", "NORMALISATIONS"]
