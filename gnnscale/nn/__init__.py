"""Distributed GNN layers and models.

Every layer and norm is called as ``module(x, graph)`` with this rank's rows ``x`` and its
:class:`~gnnscale.graph.RankGraph`, and equals its PyG (or torch) counterpart applied to the
whole graph: :class:`GCNLayer` (``GCNConv``), :class:`SAGELayer` (``SAGEConv``, mean/sum/max),
:class:`GATLayer` (``GATConv``), :class:`GATv2Layer` (``GATv2Conv``), :class:`GINLayer` (``GINConv``), :class:`DistributedConv` (any
one-hop ``MessagePassing`` layer), :class:`DistributedBatchNorm` (``BatchNorm1d``) and
:class:`LayerNorm` (PyG ``LayerNorm``, node or graph mode). :class:`GNN` stacks them; its model
names are :data:`MODEL_NAMES`. :class:`ResidualGNN` is Platonov et al.'s residual model (norm,
graph module, feed-forward network, skip) with GCN, SAGE or GAT blocks.

Importing this package loads no torch: ``MODEL_NAMES`` is here at once (the command line's
choices); the layers and models load from their modules on first use.
"""

from __future__ import annotations

from ..lazy_names import on_first_use
from .model_names import MODEL_NAMES

__all__ = ["GCNLayer", "SAGELayer", "GATLayer", "GATv2Layer", "GINLayer", "DistributedConv",
           "DistributedBatchNorm", "LayerNorm", "NORMS", "make_norm", "global_sum", "GNN",
           "MODEL_NAMES", "build_layer", "ResidualGNN", "RESIDUAL_BLOCKS"]

#: the names loaded when one of them is first asked for (their modules import torch)
_ON_FIRST_USE = tuple(name for name in __all__ if name != "MODEL_NAMES")


def _load() -> dict:
    """The names of :data:`_ON_FIRST_USE`, imported."""
    from .conv import GCNLayer, SAGELayer
    from .gat import GATLayer, GATv2Layer
    from .gin import GINLayer
    from .models import GNN, build_layer
    from .norms import NORMS, DistributedBatchNorm, LayerNorm, global_sum, make_norm
    from .pyg_wrapper import DistributedConv
    from .residual_blocks import RESIDUAL_BLOCKS, ResidualGNN

    return locals()


__getattr__, __dir__ = on_first_use(globals(), _ON_FIRST_USE, _load)
