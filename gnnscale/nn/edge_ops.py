"""Per-edge operations on one rank's local graph: cached edge lists, scatter-max, edge softmax.

Every in-edge of an owned node is stored on the owner's rank, so reductions over a destination's
in-edges (max, softmax) are local once the halo rows are present: no extra communication.

The reductions use ``torch.Tensor.scatter_reduce_``/``index_add_`` exactly as PyG does on CPU
(``torch_geometric.utils.scatter`` and ``softmax`` without ``torch_scatter``), so outputs and
gradients (ties in a max share the gradient evenly) are the same as PyG's. (``segment_reduce``
over the CSR-ordered edges is faster, but in torch 2.13 its backward gives repeated edges' tied
maxima each the full gradient, so it would differ from PyG.)
"""

from __future__ import annotations

import weakref

import torch

from ..graph import RankGraph

_cache: "weakref.WeakKeyDictionary[RankGraph, dict]" = weakref.WeakKeyDictionary()


def cached(graph: RankGraph, key: str, build):
    """``build()`` once per (graph, key); later calls return the stored value."""
    per_graph = _cache.setdefault(graph, {})
    if key not in per_graph:
        per_graph[key] = build()
    return per_graph[key]


def local_edges(graph: RankGraph) -> tuple[torch.Tensor, torch.Tensor]:
    """``(src, dst)`` of every local edge: src in ``[0, num_local)``, dst an owned row."""
    def build():
        edge_index = graph.local_edge_index()
        return edge_index[0].contiguous(), edge_index[1].contiguous()
    return cached(graph, "edges", build)


def inner_first_edges(graph: RankGraph, self_loops: bool = False
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(inner_src, halo_src, dst)``: the local edges (with ``self_loops``: those of
    :func:`local_edges_with_self_loops`) reordered with owned sources first; ``inner_src``
    indexes owned rows, ``halo_src`` halo rows (``src - num_owned``), ``dst`` the destinations
    of both, in that order."""
    def build():
        src, dst = local_edges_with_self_loops(graph) if self_loops else local_edges(graph)
        inner = src < graph.num_owned
        return (src[inner].contiguous(), (src[~inner] - graph.num_owned).contiguous(),
                torch.cat([dst[inner], dst[~inner]]).contiguous())
    return cached(graph, f"edges, inner first, self_loops={self_loops}", build)


def local_edges_with_self_loops(graph: RankGraph) -> tuple[torch.Tensor, torch.Tensor]:
    """Local edges with existing self-loops removed and one self-loop per owned node appended.

    This is PyG's ``remove_self_loops`` + ``add_self_loops`` (as in ``GATConv``). Owned node
    ``i`` is local column ``i`` (owned rows come first), so a self-loop is ``src == dst``.
    """
    def build():
        src, dst = local_edges(graph)
        keep = src != dst
        loops = torch.arange(graph.num_owned, device=src.device)
        return torch.cat([src[keep], loops]), torch.cat([dst[keep], loops])
    return cached(graph, "edges+self_loops", build)


def scatter_max(values: torch.Tensor, index: torch.Tensor, num_rows: int) -> torch.Tensor:
    """Row-wise max of ``values`` [E, ...] grouped by ``index`` [E]; empty groups give 0.

    Returns ``[num_rows, ...]``. Gradients go to the maximising entries (shared among ties).
    """
    out = values.new_zeros((num_rows, *values.shape[1:]))
    expanded = index.view(-1, *([1] * (values.dim() - 1))).expand_as(values)
    return out.scatter_reduce_(0, expanded, values, reduce="amax", include_self=False)


def scatter_max_or_minus_inf(values: torch.Tensor, index: torch.Tensor,
                             num_rows: int) -> torch.Tensor:
    """As :func:`scatter_max` (no gradient), but groups without entries give ``-inf``, so
    maxima over parts of a group's entries can be combined with ``torch.maximum``."""
    out = values.new_full((num_rows, *values.shape[1:]), float("-inf"))
    expanded = index.view(-1, *([1] * (values.dim() - 1))).expand_as(values)
    return out.scatter_reduce_(0, expanded, values.detach(), reduce="amax", include_self=True)


def scatter_sum(values: torch.Tensor, index: torch.Tensor, num_rows: int) -> torch.Tensor:
    """Row-wise sum of ``values`` [E, ...] grouped by ``index`` [E] -> ``[num_rows, ...]``."""
    return values.new_zeros((num_rows, *values.shape[1:])).index_add_(0, index, values)


def edge_softmax(scores: torch.Tensor, index: torch.Tensor, num_rows: int) -> torch.Tensor:
    r"""Softmax of ``scores`` [E, ...] over the edges sharing a destination ``index`` [E].

    .. math:: \alpha_e = \exp(s_e - m_{d(e)}) / (\sum_{e': d(e')=d(e)} \exp(s_{e'} - m_{d(e)})
              + 10^{-16})

    with :math:`m_d` the (detached) maximum score into :math:`d`, as
    ``torch_geometric.utils.softmax``.
    """
    row_max = scatter_max(scores.detach(), index, num_rows)
    weights = (scores - row_max.index_select(0, index)).exp()
    row_sum = scatter_sum(weights, index, num_rows) + 1e-16
    return weights / row_sum.index_select(0, index)
