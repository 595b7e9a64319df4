"""What one rank sees: :class:`RankGraph` (the interface of :class:`LocalGraph` and the
vertex-cut graph), :class:`HaloPlan`, the halo exchange, aggregation and edge weights."""

from .aggregate import aggregate
from .edge_weights import NORMALISATIONS, edge_weights
from .halo import CommStats, HaloExchange, HaloPlan, exchange_halo
from .local_graph import LocalGraph
from .rank_graph import RankGraph
from .sparse import SparseBlock

__all__ = ["RankGraph", "LocalGraph", "HaloPlan", "HaloExchange", "CommStats", "exchange_halo",
           "aggregate", "SparseBlock", "NORMALISATIONS", "edge_weights"]
