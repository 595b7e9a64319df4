"""Distributed GNN layers and models."""

from .conv import GCNLayer, SAGELayer
from .models import GNN, MODEL_NAMES

__all__ = ["GCNLayer", "SAGELayer", "GNN", "MODEL_NAMES"]
