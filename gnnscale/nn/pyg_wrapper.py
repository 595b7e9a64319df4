"""Run any one-hop PyG ``MessagePassing`` layer on a distributed graph.

A one-hop layer computes a node's output from its own row, its in-edges and their source rows.
Every in-edge of an owned node lives on the owner's rank, so after one halo exchange the layer
runs unchanged on the local graph: sources ``[owned; halo]``, destinations the owned rows.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from ..graph import RankGraph
from .edge_ops import cached, local_edges

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
    by the *destination*, as mean aggregation or ``ClusterGCNConv``, is fine), not on the
    other destinations (no batch statistics inside the layer). Layers known to
    need more (several hops, or source-side degrees as ``GCNConv``) are refused, and so are
    lazy layers (``in_channels=-1``: ranks would initialise them differently). Edge features
    are not carried (the local graph has none).

    With peers to exchange with, the halo exchange is posted first and the layer runs twice:
    while the halo travels, on the owned nodes whose in-edges all come from owned sources
    (interior), then, once it has arrived, on the others (boundary), each call seeing every
    in-edge of its destinations in their stored order (see :class:`DestinationSplit`). The
    halo gradients travel back while the interior call's backward runs. ``gnnscale train
    --profile`` reports the fraction of the exchange this hides.

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
        finish = graph.halo_async(x) if graph.num_owned > 0 else None
        if finish is None:  # one rank, an empty part, or halos from a staleness policy
            edge_index = cached(graph, "edge_index", graph.local_edge_index)
            x_all = graph.gather_with_halo(x)
            return self._call(x_all, x, edge_index, kwargs)
        split = DestinationSplit.of(graph)
        parts = []
        if split.num_interior > 0:  # owned sources only: runs while the halo travels
            rows = x.index_select(0, split.interior_first)
            parts.append(self._call(rows, rows[:split.num_interior], split.interior_edges,
                                    kwargs))
        halo = finish()
        if split.num_boundary == 0:  # no halo rows, but peers still expect gradients back
            return _WithEmptyHalo.apply(parts[0], halo).index_select(0, split.position)
        rows = x.index_select(0, split.boundary_first)
        parts.append(self._call(torch.cat([rows, halo]), rows[:split.num_boundary],
                                split.boundary_edges, kwargs))
        out = parts[0] if len(parts) == 1 else torch.cat(parts)
        return out.index_select(0, split.position)

    def _call(self, sources: torch.Tensor, destinations: torch.Tensor, edge_index: torch.Tensor,
              kwargs: dict) -> torch.Tensor:
        """The layer over ``edge_index`` (sources index ``sources``, destinations
        ``destinations``, which are also the first rows of ``sources``); one row per
        destination."""
        if self.bipartite:
            return self.conv((sources, destinations), edge_index, **kwargs)
        return self.conv(sources, edge_index, **kwargs)[:destinations.size(0)]

    def extra_repr(self) -> str:
        return f"bipartite={self.bipartite}"


class _WithEmptyHalo(torch.autograd.Function):
    """``out`` unchanged, with the rank's (empty) halo rows as a second input, so backward
    posts their reverse exchange as every other rank does: a rank whose nodes have no halo
    in-edges still takes part in each exchange its peers make."""

    @staticmethod
    def forward(ctx, out: torch.Tensor, halo: torch.Tensor) -> torch.Tensor:
        ctx.halo_shape, ctx.halo_dtype = halo.shape, halo.dtype
        return out.view_as(out)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, grad.new_zeros(ctx.halo_shape, dtype=ctx.halo_dtype)


@dataclass(frozen=True)
class DestinationSplit:
    """The owned nodes of one rank split for :class:`DistributedConv`'s two calls.

    Interior nodes have in-edges from owned sources only; boundary nodes have at least one from
    a halo node. Each call numbers its sources so that its destinations come first, in the
    same order (destination ``i`` is source ``i``: layers that add a self-loop ``i -> i`` per
    destination, as ``GATConv`` on a bipartite input, loop each node onto itself):

    - interior call: sources ``x[interior_first]`` = ``[interior; boundary]``, destinations its
      first ``num_interior`` rows, edges ``interior_edges`` (every in-edge of an interior node);
    - boundary call: sources ``[x[boundary_first]; halo]`` = ``[boundary; interior; halo]``,
      destinations its first ``num_boundary`` rows, edges ``boundary_edges``.

    Edges keep their stored order within each destination. ``position[v]`` is owned row ``v``'s
    row in the calls' outputs concatenated (interior, then boundary).
    """

    num_interior: int
    num_boundary: int
    interior_first: torch.Tensor
    boundary_first: torch.Tensor
    interior_edges: torch.Tensor
    boundary_edges: torch.Tensor
    position: torch.Tensor

    @classmethod
    def of(cls, graph: RankGraph) -> "DestinationSplit":
        """The split of ``graph``'s owned nodes (built once per graph)."""
        return cached(graph, "destination split", lambda: cls._build(graph))

    @classmethod
    def _build(cls, graph: RankGraph) -> "DestinationSplit":
        src, dst = local_edges(graph)
        n = graph.num_owned
        is_boundary = torch.zeros(n, dtype=torch.bool, device=dst.device)
        is_boundary[dst[src >= n]] = True
        interior = (~is_boundary).nonzero().flatten()
        boundary = is_boundary.nonzero().flatten()
        k = interior.numel()
        interior_first = torch.cat([interior, boundary])
        position = torch.empty_like(interior_first)
        position[interior_first] = torch.arange(n, device=dst.device)
        # boundary call: [boundary; interior] is interior_first rotated by k; halo rows follow
        boundary_first = torch.cat([boundary, interior])
        in_boundary_call = torch.cat([(position - k) % n,
                                      torch.arange(n, graph.num_local, device=dst.device)])
        into_boundary = is_boundary[dst]
        inner = ~into_boundary
        interior_edges = torch.stack([position[src[inner]], position[dst[inner]]])
        boundary_edges = torch.stack([in_boundary_call[src[into_boundary]],
                                      in_boundary_call[dst[into_boundary]]])
        return cls(k, n - k, interior_first, boundary_first, interior_edges.contiguous(),
                   boundary_edges.contiguous(), position)
