"""edge_weights on a whole graph equals PyG's gcn_norm (gcn), 1/in-degree (mean), ones (sum)."""

import numpy as np
import pytest
import torch
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from gnnscale.graph import NORMALISATIONS, edge_weights


def _graph(seed=0, n=40, m=200):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = rng.integers(0, n, m)
    src[:5] = dst[:5] = np.arange(5)          # self-loops
    src[5:8], dst[5:8] = 3, 3                 # a repeated self-loop
    src[8:10], dst[8:10] = 7, 9               # a repeated edge
    return n, src.astype(np.int64), dst.astype(np.int64)


def _dense(n, dst, src, weights):
    out = np.zeros((n, n))
    np.add.at(out, (dst, src), weights)
    return out


def _degrees(n, src, dst):
    return np.bincount(dst, minlength=n), np.bincount(dst[src == dst], minlength=n)


def test_gcn_equals_pyg_gcn_norm():
    n, src, dst = _graph()
    in_degree, self_loops = _degrees(n, src, dst)
    d, s, w = edge_weights(dst, src, "gcn", in_degree, self_loops, n)
    edge_index, pyg_w = gcn_norm(torch.from_numpy(np.stack([src, dst])), None, n,
                                 add_self_loops=True, dtype=torch.float64)
    expected = _dense(n, edge_index[1].numpy(), edge_index[0].numpy(), pyg_w.numpy())
    np.testing.assert_allclose(_dense(n, d, s, w), expected, rtol=1e-12)


def test_mean_and_sum():
    n, src, dst = _graph(seed=1)
    in_degree, self_loops = _degrees(n, src, dst)
    d, s, w = edge_weights(dst, src, "mean", in_degree, self_loops, n)
    np.testing.assert_array_equal(d, dst)
    np.testing.assert_allclose(w, 1.0 / in_degree[dst])
    rows = _dense(n, d, s, w).sum(axis=1)
    np.testing.assert_allclose(rows[in_degree > 0], 1.0)
    d, s, w = edge_weights(dst, src, "sum", in_degree, self_loops, n)
    np.testing.assert_array_equal(w, np.ones(len(src)))


def test_global_degrees_make_a_parts_weights_the_wholes():
    """Owned rows 0..k-1 of a part with local ids = global ids: the same weights as the whole."""
    n, src, dst = _graph(seed=2)
    in_degree, self_loops = _degrees(n, src, dst)
    k = 15
    mine = dst < k
    for kind in NORMALISATIONS:
        whole = _dense(n, *edge_weights(dst, src, kind, in_degree, self_loops, n))
        part = _dense(n, *edge_weights(dst[mine], src[mine], kind, in_degree, self_loops, k))
        np.testing.assert_allclose(part[:k], whole[:k])


def test_unknown_normalisation_is_refused():
    with pytest.raises(ValueError, match="unknown normalisation 'max'"):
        edge_weights(np.zeros(1, np.int64), np.zeros(1, np.int64), "max", np.ones(1),
                     np.zeros(1), 1)
