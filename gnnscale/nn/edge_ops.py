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

import math
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


#: Bytes of messages :func:`weighted_sum` forms at a time: the edges are taken in chunks whose
#: gathered source rows take this many bytes, so no tensor of every edge's message is ever held
#: (PyG's ``GATConv`` keeps two for backward; DGL's fused ``u_mul_e_sum`` none) and a chunk's
#: gather, product and scatter stay in the core's cache (docs/performance.md, "How a training
#: step runs", compares it with larger and smaller chunks).
CHUNK_BYTES = 2**20
#: The same on a GPU, where each chunk costs a few kernel launches and there is no core-sized
#: cache to stay in: large enough that launches do not dominate (not tuned: no GPU here).
DEVICE_CHUNK_BYTES = 256 * 2**20


def weighted_sum(rows: torch.Tensor, weights: torch.Tensor, src: torch.Tensor,
                 dst: torch.Tensor, num_rows: int) -> torch.Tensor:
    r"""``out[d] = \sum_{e: dst_e = d} weights[e] * rows[src_e]``, the weights broadcast over a
    row (e.g. ``rows`` [R, H, C] with ``weights`` [E, H, 1]: one weight per edge and head).

    Returns ``[num_rows, *rows.shape[1:]]``: the same sums, in the same order, as
    ``scatter_sum(weights * rows.index_select(0, src), dst, num_rows)``, but backward keeps
    only ``rows`` and ``weights``: the messages are formed a chunk of edges at a time
    (:data:`CHUNK_BYTES`) forward and again backward, where a weight's gradient is the dot
    product of its destination's output gradient with its source row.
    """
    return _WeightedSum.apply(rows, weights, src, dst, num_rows)


def _edge_chunks(num_edges: int, rows: torch.Tensor) -> list[slice]:
    row_bytes = math.prod(rows.shape[1:]) * rows.element_size()
    budget = CHUNK_BYTES if rows.device.type == "cpu" else DEVICE_CHUNK_BYTES
    step = max(1, budget // max(1, row_bytes))
    return [slice(start, min(start + step, num_edges)) for start in range(0, num_edges, step)]


class _WeightedSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, rows, weights, src, dst, num_rows):
        out = rows.new_zeros((num_rows, *rows.shape[1:]))
        for part in _edge_chunks(src.numel(), rows):
            out.index_add_(0, dst[part], weights[part] * rows.index_select(0, src[part]))
        ctx.save_for_backward(rows, weights, src, dst)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        rows, weights, src, dst = ctx.saved_tensors
        need_rows, need_weights = ctx.needs_input_grad[:2]
        grad_rows = rows.new_zeros(rows.shape) if need_rows else None
        grad_weights = torch.empty_like(weights) if need_weights else None
        for part in _edge_chunks(src.numel(), rows):
            grad = grad_out.index_select(0, dst[part])
            if need_weights:
                products = grad * rows.index_select(0, src[part])
                grad_weights[part] = products.sum_to_size(grad_weights[part].shape)
            if need_rows:
                grad_rows.index_add_(0, src[part], weights[part] * grad)
        return grad_rows, grad_weights, None, None, None
