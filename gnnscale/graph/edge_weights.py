"""Edge weights of a normalised adjacency, from *global* degrees (a pure function).

The shape of PyG's ``gcn_norm``: edges in, (edges, weights) out. Degrees are a property of the
whole graph, not of one rank's part, so the caller passes the global in-degree and self-loop
count of every local node; a rank's share of the weights then equals the whole graph's.

- ``"gcn"``: ``D^-1/2 (A + I) D^-1/2`` with existing self-loops replaced by one unit loop per
  owned node, ``D`` the in-degree counting that loop (as PyG's ``gcn_norm``).
- ``"mean"``: ``1/in_degree(v)`` on every in-edge of ``v`` (isolated nodes aggregate to zero).
- ``"sum"``: unit weights.
"""

from __future__ import annotations

import numpy as np

NORMALISATIONS = ("gcn", "mean", "sum")


def check_normalisation(kind: str) -> str:
    """Refuse an unknown normalisation name."""
    if kind not in NORMALISATIONS:
        raise ValueError(f"unknown normalisation {kind!r}; choose one of "
                         f"{', '.join(NORMALISATIONS)}")
    return kind


def edge_weights(dst: np.ndarray, src: np.ndarray, kind: str, in_degree: np.ndarray,
                 self_loops: np.ndarray, num_owned: int):
    """``(dst, src, weight)`` of the ``kind``-normalised adjacency over local ids.

    Args:
        dst: int64 ``[E]`` local destination row of every edge.
        src: int64 ``[E]`` local source column of every edge.
        kind: ``"gcn"``, ``"mean"`` or ``"sum"`` (see the module docstring).
        in_degree: global in-degree of every local node.
        self_loops: global number of self-loops of every local node (``"gcn"`` only).
        num_owned: owned nodes, the first local ids; ``"gcn"`` adds one unit loop to each
            (local row ``i`` is local column ``i`` for owned nodes).

    Returns float64 weights; for ``"gcn"`` the edges come back without their self-loops and
    with ``num_owned`` loops appended.
    """
    check_normalisation(kind)
    if kind == "sum":
        return dst, src, np.ones(src.shape[0], dtype=np.float64)
    if kind == "mean":
        return dst, src, 1.0 / np.asarray(in_degree, np.float64)[dst]
    keep = dst != src
    loops = np.arange(num_owned, dtype=np.int64)
    dst = np.concatenate([dst[keep], loops])
    src = np.concatenate([src[keep], loops])
    inv_sqrt = 1.0 / np.sqrt((np.asarray(in_degree) - np.asarray(self_loops) + 1)
                             .astype(np.float64))
    return dst, src, inv_sqrt[dst] * inv_sqrt[src]
