"""Gradient synchronisation shared by GNN and CNN training.

- :class:`DataParallel`: bucketed allreduce overlapped with backward, ``no_sync``, compression
  (the CNN path, and the GNN trainer's with ``average=False``).
- :mod:`.large_batch`: LARS, linear LR scaling with warmup, label smoothing, autocast.
"""

from .bucket_size import default_bucket_bytes, fit_latency_bandwidth
from .compression import compress, decompress
from .data_parallel import DataParallel
from .large_batch import (LARS, autocast, label_smoothing_cross_entropy, scaled_lr,
                          warmup_factor, warmup_schedule)

__all__ = ["DataParallel", "LARS", "autocast", "compress", "decompress", "default_bucket_bytes",
           "fit_latency_bandwidth", "label_smoothing_cross_entropy", "scaled_lr", "warmup_factor", "warmup_schedule"]
