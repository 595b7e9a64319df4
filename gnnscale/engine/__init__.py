"""Training loop, rank-local problem set-up and metrics."""

from .local_problem import LocalProblem
from .metrics import EpochRecord, MetricsWriter
from .trainer import Trainer, rank_seed, summarise

__all__ = ["LocalProblem", "Trainer", "EpochRecord", "MetricsWriter", "rank_seed", "summarise"]
