"""R-MAT graphs with Graph500 parameters, generated in chunks so large scales fit in memory."""

from __future__ import annotations

import numpy as np

from gnnscale.data._csr import csr_from_sorted_keys
from gnnscale.data.graph_data import GraphData
from gnnscale.data.splits import fraction_split
from gnnscale.errors import UsageError

# Edges generated per chunk: bounds the temporaries (a few arrays of this length) at any scale.
CHUNK_EDGES = 1 << 21
MAX_SCALE = 31


def generate_rmat(scale: int, edge_factor: int = 16, a: float = 0.57, b: float = 0.19,
                  c: float = 0.19, seed: int = 0, num_features: int = 16, num_classes: int = 8,
                  feature_noise: float = 1.0, split: int = 0, train_fraction: float = 0.5,
                  val_fraction: float = 0.25, test_fraction: float = 0.25) -> GraphData:
    """Generate a seeded R-MAT graph (Chakrabarti et al., 2004) with Graph500 defaults.

    ``2**scale`` nodes and ``edge_factor * 2**scale`` generated edges. Each edge picks one
    quadrant of the adjacency matrix per bit level with probabilities ``a`` (top left), ``b``
    (top right), ``c`` (bottom left) and ``d = 1 - a - b - c``, as the Graph500 generator does
    (without its per-level noise); node ids are then scrambled with a seeded random permutation
    so high-degree nodes are spread over the id range. The graph is made undirected: self loops
    dropped, every edge in both directions, duplicates removed, so ``num_edges`` is somewhat
    below ``2 * edge_factor * 2**scale`` and many nodes are isolated (R-MAT's skew).

    Edges are drawn ``CHUNK_EDGES`` at a time into one int64 key array that is sorted and
    de-duplicated in place: the peak is about ``16 * edge_factor * 2**scale`` bytes for the keys
    (scale 22: about 1.1 GB) plus the features, so scale 22 fits in a few GB.

    Node data are random, not structural: labels uniform over ``num_classes``; features
    ``centroid[label] + feature_noise * N(0, 1)`` (``num_features`` columns, centroids from
    ``N(0, 1/num_features)``) so a model has something to learn; a random
    ``train_fraction``/``val_fraction``/``test_fraction`` split, the ``split``-th for this seed.
    """
    scale, edge_factor = int(scale), int(edge_factor)
    if not 1 <= scale <= MAX_SCALE:
        raise UsageError(f"scale must be in [1, {MAX_SCALE}], got {scale}")
    if edge_factor < 1:
        raise UsageError(f"edge_factor must be at least 1, got {edge_factor}")
    d = 1.0 - a - b - c
    if min(a, b, c) < 0 or d < -1e-12:
        raise UsageError(f"R-MAT probabilities a={a}, b={b}, c={c} must be >= 0 with "
                         "a + b + c <= 1")
    if num_features < 1 or num_classes < 1:
        raise UsageError(f"num_features and num_classes must be at least 1, got "
                         f"{num_features}, {num_classes}")
    num_nodes = 1 << scale
    num_generated = edge_factor * num_nodes
    rng = np.random.default_rng([seed, scale])
    permutation = rng.permutation(num_nodes).astype(np.int64)

    keys = np.empty(2 * num_generated, dtype=np.int64)
    filled = 0
    for start in range(0, num_generated, CHUNK_EDGES):
        count = min(CHUNK_EDGES, num_generated - start)
        src, dst = _rmat_chunk(rng, scale, count, a, b, c)
        src, dst = permutation[src], permutation[dst]
        keep = src != dst
        src, dst = src[keep], dst[keep]
        kept = src.size
        np.multiply(dst, num_nodes, out=keys[filled:filled + kept])
        keys[filled:filled + kept] += src
        np.multiply(src, num_nodes, out=keys[filled + kept:filled + 2 * kept])
        keys[filled + kept:filled + 2 * kept] += dst
        filled += 2 * kept
    del permutation, src, dst, keep
    keys.resize(filled, refcheck=False)
    keys.sort()
    indptr, indices = csr_from_sorted_keys(keys, num_nodes, unique=False)
    del keys

    y = rng.integers(0, num_classes, num_nodes, dtype=np.int64)
    centroids = rng.normal(0.0, 1.0 / np.sqrt(num_features),
                           size=(num_classes, num_features)).astype(np.float32)
    x = np.empty((num_nodes, num_features), dtype=np.float32)
    for start in range(0, num_nodes, CHUNK_EDGES):
        stop = min(num_nodes, start + CHUNK_EDGES)
        x[start:stop] = rng.standard_normal((stop - start, num_features), dtype=np.float32)
        x[start:stop] *= feature_noise
        x[start:stop] += centroids[y[start:stop]]
    masks = fraction_split(num_nodes, train_fraction, val_fraction, test_fraction,
                           np.random.default_rng([seed, scale, 1, split]))
    return GraphData(indptr, indices, x, y, *masks, name=f"rmat-{scale}",
                     num_classes=num_classes).validate()


def _rmat_chunk(rng: np.random.Generator, scale: int, count: int, a: float, b: float,
                c: float):
    """``count`` R-MAT edges: one quadrant choice per bit level, most significant bit first."""
    src = np.zeros(count, dtype=np.int64)
    dst = np.zeros(count, dtype=np.int64)
    ab, abc = a + b, a + b + c
    for _ in range(scale):
        r = rng.random(count, dtype=np.float32)
        src <<= 1
        dst <<= 1
        src += r >= ab                          # quadrants c and d: lower half (source bit 1)
        dst += (r >= a) & ((r < ab) | (r >= abc))  # quadrants b and d: right half
    return src, dst
