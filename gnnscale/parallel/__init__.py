"""Gradient synchronisation shared by GNN and CNN training."""

from .grad_sync import DEFAULT_BUCKET_BYTES, allreduce_gradients

__all__ = ["allreduce_gradients", "DEFAULT_BUCKET_BYTES"]
