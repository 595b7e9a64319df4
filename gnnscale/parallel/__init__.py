"""Gradient synchronisation shared by GNN and CNN training.

- :func:`allreduce_gradients`: sum or average ``.grad`` after backward (the GNN trainer's path).
- :class:`DataParallel`: bucketed allreduce overlapped with backward, ``no_sync``, compression.
- :mod:`.large_batch`: LARS, linear LR scaling with warmup, label smoothing, autocast.
"""

from .bucket_size import default_bucket_bytes, fit_latency_bandwidth
from .compression import compress, decompress
from .data_parallel import DataParallel
from .grad_sync import DEFAULT_BUCKET_BYTES, allreduce_gradients
from .large_batch import (LARS, autocast, label_smoothing_cross_entropy, scaled_lr,
                          warmup_factor, warmup_schedule)

__all__ = ["allreduce_gradients", "DEFAULT_BUCKET_BYTES", "DataParallel", "LARS", "autocast",
           "compress", "decompress", "default_bucket_bytes", "fit_latency_bandwidth",
           "label_smoothing_cross_entropy", "scaled_lr", "warmup_factor", "warmup_schedule"]
