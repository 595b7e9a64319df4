"""Degree-corrected stochastic block model: communities and power-law degrees, vectorised.

R-MAT graphs have no good cut (most of their edges cross parts at any part count), real graphs
such as ogbn-products do; this generator gives graphs of a real graph's size and degree skew
whose communities a partitioner can find, and a preset with ogbn-products' published figures.
"""

from __future__ import annotations

import math

import numpy as np

from gnnscale.data._csr import csr_from_sorted_keys, dedupe_sorted_in_place
from gnnscale.data.graph_data import GraphData
from gnnscale.data.sbm import _check, centroid_features
from gnnscale.data.splits import fraction_split
from gnnscale.errors import UsageError

# Edges drawn per block: bounds the temporaries (a few float64/int64 arrays of this length).
CHUNK_EDGES = 1 << 22
# Rounds of top-up draws replacing the duplicates and self loops a round drops; each round
# draws the shortfall divided by the previous round's yield of new edges, so 2-3 rounds
# reach the count.
MAX_ROUNDS = 40

OGBN_PRODUCTS_NODES = 2_449_029
OGBN_PRODUCTS_EDGES = 61_859_140  # undirected; 123,718,280 directed
OGBN_PRODUCTS_MIXING = 0.02  # about one edge per node leaves its community (generate_dcsbm)

PRESETS = {
    "ogbn-products": {
        "num_nodes": OGBN_PRODUCTS_NODES,
        "avg_degree": 2 * OGBN_PRODUCTS_EDGES / OGBN_PRODUCTS_NODES,
        "num_classes": 47, "num_features": 100, "mixing": OGBN_PRODUCTS_MIXING,
        "degree_exponent": 2.5,
        "train_fraction": 196_615 / OGBN_PRODUCTS_NODES,
        "val_fraction": 39_323 / OGBN_PRODUCTS_NODES,
        "test_fraction": 2_213_091 / OGBN_PRODUCTS_NODES,
    },
}
"""Figures of named real graphs (see :func:`generate_dcsbm`)."""

DEFAULTS = {"num_nodes": 10_000, "avg_degree": 20.0, "num_classes": 8, "num_features": 32,
            "mixing": 0.1, "degree_exponent": 2.5, "train_fraction": 0.5,
            "val_fraction": 0.25, "test_fraction": 0.25}
"""The generator's values for what neither the caller nor a preset sets."""


def generate_dcsbm(num_nodes: int | None = None, num_classes: int | None = None,
                   avg_degree: float | None = None, mixing: float | None = None,
                   degree_exponent: float | None = None, max_degree: float | None = None,
                   num_features: int | None = None, feature_noise: float = 1.0,
                   train_fraction: float | None = None, val_fraction: float | None = None,
                   test_fraction: float | None = None, seed: int = 0, split: int = 0,
                   preset: str | None = None, scale: float | None = None) -> GraphData:
    """Generate a seeded degree-corrected stochastic block model (Karrer & Newman, 2011).

    Every node gets a community, which is its class (``num_classes`` balanced random
    classes), and a degree propensity ``theta`` drawn from a power law
    ``P(theta) ~ theta**-degree_exponent`` truncated at ``max_degree`` (default
    ``sqrt(num_nodes * avg_degree)``, the structural cutoff above which two hubs would be
    joined by more than one expected edge), its lower end set so the mean is ``avg_degree``.
    Exactly ``round(num_nodes * avg_degree / 2)`` distinct undirected edges are drawn, each
    from one endpoint chosen with probability proportional to ``theta`` and the other, with
    probability ``1 - mixing``, proportional to ``theta`` within the first one's community,
    else proportional to ``theta`` among all the other communities' nodes. A node's expected
    degree is thus about its ``theta`` and a fraction ``mixing`` of its edges leave its
    community (slightly less after duplicates: within-community pairs repeat more often, and
    repeats are redrawn; and far more when a community has not many more nodes than
    ``avg_degree``, as in graphs of a few thousand nodes with the products preset's 47
    classes). The CSR is symmetric, without self loops or duplicates:
    ``num_edges == 2 * round(num_nodes * avg_degree / 2)``.

    Node data follow :func:`generate_sbm`: features ``centroid[class] + feature_noise *
    N(0, I)`` (``num_features`` columns); a random ``train_fraction`` / ``val_fraction`` /
    ``test_fraction`` split, the ``split``-th for this seed. Vectorised: the Python work does
    not grow with the graph (edges are drawn ``CHUNK_EDGES`` at a time); 6M undirected
    edges (``preset="ogbn-products", scale=0.1``) take about 10 s.

    ``preset="ogbn-products"`` takes the figures of ogbn-products as the OGB paper (Hu et al.,
    "Open Graph Benchmark: Datasets for Machine Learning on Graphs", NeurIPS 2020, Table 2 and
    Section 4.2) and the OGB website (ogb.stanford.edu, "ogbn-products") publish them:
    2,449,029 nodes, 61,859,140 undirected edges (123,718,280 directed), 47 classes,
    100 features, and the sales-rank split of 196,615 / 39,323 / 2,213,091 nodes
    (8 / 2 / 90 %), here drawn at random in those proportions. Neither source gives a degree
    exponent; the preset uses 2.5, the middle of the 2-3 range of product co-purchase and
    most other real networks, which with a mean of 50.5 puts the smallest expected degree
    near 17. ``scale`` keeps a fraction of the nodes at the same average degree (so
    ``scale=0.05``: 122,451 nodes, 3,092,946 undirected edges). ``mixing`` is
    :data:`OGBN_PRODUCTS_MIXING` = 0.02, about one edge of the average node (50.5 x 0.02)
    leaving its community. No published METIS edge cut of ogbn-products at 16 parts was found
    in the sources at hand; the one published partition figure found is METIS's
    communication volume at 10 parts, 2,108,759 halo rows or 0.86 per node
    (github.com/dmlc/dgl/pull/3821). On this model at 131,072 nodes METIS gives 0.73 halo rows
    per node at mixing 0.01 and 1.15 at 0.02 (benchmarks/community_graph_cut.py); the preset
    takes the round value above the figure, erring towards more communication, rather than
    an interpolated 0.013 that one figure at one part count does not pin down;
    docs/planning.md ("A graph that partitions like real ones") has the measurements.
    Options given explicitly override the preset's.

    Raises:
        UsageError: an option out of range (one line naming it and its value), an unknown
            preset, ``scale`` without a preset or with ``num_nodes``.
    """
    given = {"num_nodes": num_nodes, "num_classes": num_classes, "avg_degree": avg_degree,
             "mixing": mixing, "degree_exponent": degree_exponent,
             "num_features": num_features, "train_fraction": train_fraction,
             "val_fraction": val_fraction, "test_fraction": test_fraction}
    settings = dict(DEFAULTS)
    name = "dcsbm"
    if preset is not None:
        if preset not in PRESETS:
            raise UsageError(f"preset must be one of {', '.join(PRESETS)}, got {preset!r}")
        settings.update(PRESETS[preset])
        name = f"dcsbm-{preset}"
        if scale is not None:
            _check(isinstance(scale, (int, float)) and 0 < scale <= 1, "scale", scale,
                   "in (0, 1] (the fraction of the preset's nodes)")
            _check(num_nodes is None, "num_nodes", num_nodes,
                   f"left out when scale is given (scale={scale} sets it)")
            settings["num_nodes"] = max(2, int(round(settings["num_nodes"] * scale)))
            name = f"{name}-{scale:g}"
    elif scale is not None:
        raise UsageError(f"scale applies to a preset (preset=ogbn-products), got scale={scale!r} "
                         "without one")
    settings.update({k: v for k, v in given.items() if v is not None})
    n, k = settings["num_nodes"], settings["num_classes"]
    degree, mix, gamma = settings["avg_degree"], settings["mixing"], settings["degree_exponent"]
    features = settings["num_features"]
    numbers = {**settings, "max_degree": max_degree, "feature_noise": feature_noise}
    for option, value in numbers.items():  # before any comparison: "abc" < 1 would raise
        _check(value is None or (isinstance(value, (int, float, np.integer, np.floating))
                                 and not isinstance(value, bool)), option, value, "a number")
    _check(isinstance(n, (int, np.integer)) and n >= 2, "num_nodes", n, "an integer >= 2")
    _check(isinstance(k, (int, np.integer)) and 1 <= k <= n, "num_classes", k,
           f"an integer in [1, num_nodes={n}]")
    _check(0 < degree <= (n - 1) / 4, "avg_degree", degree,
           f"in (0, (num_nodes - 1) / 4 = {(n - 1) / 4:g}] (sparse enough to draw distinct edges)")
    _check(0.0 <= mix <= 1.0, "mixing", mix, "in [0, 1]")
    _check(k > 1 or mix == 0, "mixing", mix, "0 with one class (no other community to reach)")
    _check(2 < gamma <= 6, "degree_exponent", gamma, "in (2, 6]")
    cap = math.sqrt(n * degree) if max_degree is None else max_degree
    _check(degree < cap <= n - 1, "max_degree", cap,
           f"above avg_degree={degree:g} and at most num_nodes - 1 = {n - 1}")
    _check(isinstance(features, (int, np.integer)) and features >= 1, "num_features", features,
           "an integer >= 1")
    _check(feature_noise >= 0, "feature_noise", feature_noise, ">= 0")
    fractions = (settings["train_fraction"], settings["val_fraction"], settings["test_fraction"])
    _check(all(f >= 0 for f in fractions) and 0 < fractions[0] and sum(fractions) <= 1 + 1e-9,
           "train_fraction/val_fraction/test_fraction", fractions,
           ">= 0 with train_fraction > 0 and a sum of at most 1")
    _check(isinstance(split, (int, np.integer)) and split >= 0, "split", split, ">= 0")
    n, k = int(n), int(k)

    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n, dtype=np.int64) % k)
    theta = power_law_propensities(rng, n, degree, gamma, cap)
    num_edges = int(round(n * degree / 2))
    keys = _draw_edges(rng, labels, theta, k, mix, num_edges)
    indptr, indices = _symmetric_csr(keys, n)
    del keys
    x = centroid_features(rng, labels, k, int(features), feature_noise)
    masks = fraction_split(n, *fractions, np.random.default_rng([seed, 1, split]))
    return GraphData(indptr, indices, x, labels, *masks, name=name, num_classes=k).validate()


def power_law_propensities(rng: np.random.Generator, num_nodes: int, mean: float,
                           exponent: float, cap: float) -> np.ndarray:
    """float64 ``[num_nodes]`` from a power law of density ``~ t**-exponent`` on
    ``[low, cap]``, ``low`` chosen so the distribution's mean is ``mean``."""
    a = exponent - 1.0

    def mean_over_low(ratio):  # mean / low of the power law on [1, ratio]
        return a / (a - 1.0) * (1.0 - ratio ** (1.0 - a)) / (1.0 - ratio ** -a)

    low = mean * (a - 1.0) / a  # the untruncated law's lower end, then a fixed point
    for _ in range(100):  # converges in a few dozen steps; a fixed count, not per node
        low = min(mean / mean_over_low(cap / low), mean * (1 - 1e-9))
    u = rng.random(num_nodes)
    tail = (cap / low) ** -a
    return low * (1.0 - u * (1.0 - tail)) ** (-1.0 / a)


def _draw_edges(rng, labels, theta, num_classes, mixing, num_edges) -> np.ndarray:
    """``num_edges`` distinct undirected edges as sorted int64 keys ``low * N + high``."""
    n = labels.size
    order = np.argsort(labels, kind="stable")  # nodes grouped by community
    cumulative = np.cumsum(theta[order])
    total = float(cumulative[-1])
    volume = np.bincount(labels, weights=theta, minlength=num_classes)
    start = np.concatenate([[0.0], np.cumsum(volume)[:-1]])
    keys = np.zeros(0, dtype=np.int64)
    yield_rate = 0.95  # new distinct edges per draw; measured after each round
    for _ in range(MAX_ROUNDS):
        missing = num_edges - keys.size
        if missing <= 0:
            break
        wanted = int(missing / yield_rate * 1.02) + 16
        drawn = [_draw_block(rng, labels, order, cumulative, total, volume, start, mixing,
                             min(CHUNK_EDGES, wanted - begin))
                 for begin in range(0, wanted, CHUNK_EDGES)]
        before = keys.size
        keys = np.concatenate([keys, *drawn])
        del drawn
        keys.sort()
        keys = dedupe_sorted_in_place(keys)
        yield_rate = max((keys.size - before) / wanted, 0.01)
    else:
        raise UsageError(f"avg_degree {2 * num_edges / n:g} is too dense for this degree "
                         f"distribution: {keys.size} distinct edges after {MAX_ROUNDS} rounds")
    if keys.size > num_edges:  # drop the surplus of the last round, chosen at random
        keep = np.sort(rng.permutation(keys.size)[:num_edges])
        keys = keys[keep]
    return keys


def _draw_block(rng, labels, order, cumulative, total, volume, start, mixing, count):
    """``count`` drawn edges (self loops dropped) as keys ``low * N + high``."""
    n = labels.size
    last = n - 1
    src = order[np.minimum(np.searchsorted(cumulative, rng.random(count) * total, "right"),
                           last)]
    community = labels[src]
    own = volume[community]
    inside = rng.random(count) >= mixing
    position = np.where(inside, start[community] + rng.random(count) * own,
                        rng.random(count) * (total - own))
    # Outside the community: a point on the volume of the others, stepping over its own block.
    position += np.where(~inside & (position >= start[community]), own, 0.0)
    dst = order[np.minimum(np.searchsorted(cumulative, position, "right"), last)]
    keep = src != dst
    low, high = np.minimum(src, dst)[keep], np.maximum(src, dst)[keep]
    return low * n + high


def _symmetric_csr(keys: np.ndarray, n: int):
    """CSR by destination holding every undirected key ``low * N + high`` both ways."""
    low, high = np.divmod(keys, n)
    both = np.concatenate([high * n + low, keys])  # keys are dst * N + src
    del low, high
    both.sort()
    return csr_from_sorted_keys(both, n)
