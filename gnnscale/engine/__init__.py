"""Training loop, rank-local problem set-up, evaluation, checkpoints and inference."""

from .checkpoint import CheckpointError, load_checkpoint, read_checkpoint, save_checkpoint
from .evaluation import METRICS, evaluate_global, roc_auc
from .inference import gather_predictions, write_predictions
from .local_problem import LocalProblem
from .metrics import EpochRecord, MetricsWriter
from .trainer import Trainer, rank_seed, summarise

__all__ = ["LocalProblem", "Trainer", "EpochRecord", "MetricsWriter", "rank_seed", "summarise",
           "METRICS", "evaluate_global", "roc_auc", "save_checkpoint", "load_checkpoint",
           "read_checkpoint", "CheckpointError", "gather_predictions", "write_predictions"]
