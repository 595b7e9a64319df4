"""Run any one-hop PyG ``MessagePassing`` layer on a distributed graph.

A one-hop layer computes a node's output from its own row, its in-edges and their source rows.
Every in-edge of an owned node lives on the owner's rank, so after one halo exchange the layer
runs unchanged on the local graph: sources ``[owned; halo]``, destinations the owned rows.
"""

from __future__ import annotations

import inspect
import typing

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from ..graph import RankGraph
from .edge_ops import cached

# Layers whose output at a node depends on more than its in-edges and their sources' rows:
# several hops of propagation, or a normalisation with the *source's* degree over the whole
# graph. They would run, silently wrong, on the local graph.
NOT_ONE_HOP = {
    "GCNConv": "its symmetric normalisation needs each source's global degree; use "
               "gnnscale.nn.GCNLayer (same weights as GCNConv), or GCNConv(normalize=False)",
    "LGConv": "its symmetric normalisation needs each source's global degree; use "
              "LGConv(normalize=False)",
    "ChebConv": "it propagates over K hops", "TAGConv": "it propagates over K hops",
    "SGConv": "it propagates over K hops", "SSGConv": "it propagates over K hops",
    "APPNP": "it propagates over K hops", "MixHopConv": "it propagates over several hops",
    "GatedGraphConv": "it propagates over num_layers hops",
    "ARMAConv": "it stacks propagations and normalises with source degrees",
    "GCN2Conv": "it normalises with source degrees", "FAConv": "it normalises with source degrees",
    "DirGNNConv": "it also aggregates over out-edges, which live on other ranks",
}


def supports_pair_input(conv: nn.Module) -> bool:
    """Whether ``conv.forward`` accepts ``x=(x_src, x_dst)`` (its annotation names a tuple)."""
    try:
        annotation = inspect.signature(conv.forward).parameters["x"].annotation
    except (KeyError, ValueError):
        return False
    return "Tuple" in str(annotation) or "tuple" in str(annotation) or \
        any(arg is tuple or getattr(arg, "__origin__", None) is tuple
            for arg in typing.get_args(annotation))


def _refusal(conv: nn.Module) -> str | None:
    name = type(conv).__name__
    if name not in NOT_ONE_HOP:
        return None
    if name in ("GCNConv", "LGConv") and not getattr(conv, "normalize", True):
        return None
    return NOT_ONE_HOP[name]


class DistributedConv(nn.Module):
    r"""Makes a one-hop PyG ``MessagePassing`` layer distributed.

    .. math:: X'_{owned} = \mathrm{conv}\big((X_{owned} \Vert X_{halo}, X_{owned}),\;
              E_{local}\big)

    The halo rows are fetched with a differentiable exchange (their gradients go back to their
    owners), then the layer runs on the local bipartite graph: sources ``[owned; halo]``,
    destinations the owned rows, edges the owned nodes' in-edges. Owned rows come first in the
    local numbering, so layers that add self-loops on a bipartite input (``GATConv``,
    ``GATv2Conv``: loops ``i -> i`` for ``i < num_dst``) loop every owned node onto itself.
    Layers that take only one feature matrix run on all local nodes and keep the owned rows
    (halo nodes have no local in-edges, so their rows are meaningless and dropped).

    The layer must be one-hop and local: its output at a node may depend only on that node's
    row, its in-edges, their sources' rows and counts over those in-edges (degree normalisation
    by the *destination*, as mean aggregation or ``ClusterGCNConv``, is fine). Layers known to
    need more (several hops, or source-side degrees as ``GCNConv``) are refused, and so are
    lazy layers (``in_channels=-1``: ranks would initialise them differently). Edge features
    are not carried (the local graph has none).

    The halo exchange is waited for before the layer runs: a wrapped layer is one call that
    needs every source row, so nothing of it can run while the halo travels (gnnscale's own
    layers split their work around the exchange: :class:`~gnnscale.nn.GATLayer` for
    attention).

    Args:
        conv: the PyG layer (its parameters become this module's, so gradients are
            synchronised like any other).
        bipartite: pass ``(x_src, x_dst)`` (True), the full local node set (False), or decide
            from ``conv.forward``'s annotation of ``x`` (None, default).

    Shapes: x ``[num_owned, F_in]`` -> ``[num_owned, F_out]`` (whatever ``conv`` returns per
    destination row).
    """

    def __init__(self, conv: nn.Module, bipartite: bool | None = None):
        super().__init__()
        reason = _refusal(conv)
        if reason is not None:
            raise ValueError(f"{type(conv).__name__} cannot run distributed on one-hop halos: "
                             f"{reason}")
        if not callable(getattr(conv, "propagate", None)):
            raise TypeError(f"DistributedConv wraps a torch_geometric MessagePassing layer; got "
                            f"{type(conv).__name__}")
        if any(is_lazy(p) for p in conv.parameters()):
            raise ValueError(f"{type(conv).__name__} has lazy parameters (in_channels=-1): each "
                             f"rank would initialise them differently on its first call; give "
                             f"the input width explicitly")
        self.conv = conv
        self.bipartite = supports_pair_input(conv) if bipartite is None else bool(bipartite)

    def reset_parameters(self) -> None:
        self.conv.reset_parameters()

    def forward(self, x: torch.Tensor, graph: RankGraph, **kwargs) -> torch.Tensor:
        """Extra keyword arguments go to ``conv`` unchanged."""
        edge_index = cached(graph, "edge_index", graph.local_edge_index)
        x_all = graph.gather_with_halo(x)
        if self.bipartite:
            return self.conv((x_all, x), edge_index, **kwargs)
        return self.conv(x_all, edge_index, **kwargs)[:graph.num_owned]

    def extra_repr(self) -> str:
        return f"bipartite={self.bipartite}"
