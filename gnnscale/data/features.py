"""Generated, seeded node data for structure-only graphs (SNAP edge lists, bare adjacency files).

Such graphs have edges but no features, labels or splits. :func:`synthetic_node_data` makes all
three from the structure, so training and benchmarks run on them with no extra files:

- **labels** (``num_classes`` classes): graph Voronoi cells. ``8 * num_classes`` seed nodes are
  drawn at random; every node takes the cell of its nearest seed in hops along the edges
  (multi-source BFS, ties broken at random); nodes no seed reaches (other components) get fresh
  seeds until all are covered, isolated nodes get a random cell. Cells are then assigned to
  classes greedily, largest first, to the class with the fewest nodes so far, which balances the
  classes. Then 5 rounds of synchronous label propagation: every node takes the class most
  frequent among its in-neighbours and itself (random tie-breaks). The result follows the
  graph's communities: on the SNAP graphs here 70-94% of edges join same-class nodes (chance
  25% with 4 classes), with classes between about half and twice the mean size.
- **features** (``num_features`` columns, default ``num_classes + 1``): the first
  ``num_classes`` columns are the one-hot label plus ``feature_noise * N(0, 1)`` noise; the next
  is the standardised ``log(1 + degree)`` (in plus out); any further columns are ``N(0, 1)``
  noise (use them to set the width for throughput benchmarks). A node's own features give its
  class only noisily; averaging over neighbours, as GNN layers do, removes much of the noise.
- **split**: a random 50% / 25% / 25% train/val/test split of all nodes (the proportions of the
  heterophilous-graphs benchmark); ``split=k`` draws the k-th such split.

Labels and features depend on ``seed`` only; masks on ``(seed, split)``.
"""

from __future__ import annotations

import numpy as np

from gnnscale.data.splits import fraction_split
from gnnscale.errors import UsageError

CELLS_PER_CLASS = 8
LABEL_PROPAGATION_ROUNDS = 5


def synthetic_node_data(indptr: np.ndarray, indices: np.ndarray, *, num_classes: int = 4,
                        num_features: int | None = None, feature_noise: float = 1.0,
                        seed: int = 0, split: int = 0, train_fraction: float = 0.5,
                        val_fraction: float = 0.25, test_fraction: float = 0.25):
    """Make ``(x, y, train_mask, val_mask, test_mask)`` for the CSR graph ``(indptr, indices)``.

    See the module docstring for the exact recipe. ``x`` is float32 ``[N, num_features]``, ``y``
    int64 ``[N]`` in ``[0, num_classes)``, masks are disjoint bool ``[N]``.
    """
    if num_classes < 1:
        raise UsageError(f"num_classes must be at least 1, got {num_classes}")
    num_features = num_classes + 1 if num_features is None else int(num_features)
    if num_features < num_classes + 1:
        raise UsageError(f"num_features must be at least num_classes + 1 = {num_classes + 1} "
                         f"(noisy one-hot label plus log-degree), got {num_features}")
    if split < 0:
        raise UsageError(f"split must be >= 0, got {split}")
    num_nodes = len(indptr) - 1
    rng = np.random.default_rng([seed, 0])
    y = voronoi_labels(indptr, indices, num_classes, rng)
    y = propagate_labels(indptr, indices, y, num_classes, LABEL_PROPAGATION_ROUNDS, rng)

    x = np.empty((num_nodes, num_features), dtype=np.float32)
    x[:, :num_classes] = rng.standard_normal((num_nodes, num_classes), dtype=np.float32)
    x[:, :num_classes] *= feature_noise
    x[np.arange(num_nodes), y] += 1.0
    degree = np.diff(indptr) + np.bincount(indices, minlength=num_nodes)
    log_degree = np.log1p(degree.astype(np.float64))
    std = log_degree.std()
    x[:, num_classes] = (log_degree - log_degree.mean()) / (std if std > 0 else 1.0)
    if num_features > num_classes + 1:
        x[:, num_classes + 1:] = rng.standard_normal((num_nodes, num_features - num_classes - 1),
                                                     dtype=np.float32)
    masks = fraction_split(num_nodes, train_fraction, val_fraction, test_fraction,
                           np.random.default_rng([seed, 1, split]))
    return (x, y, *masks)


def voronoi_labels(indptr: np.ndarray, indices: np.ndarray, num_classes: int,
                   rng: np.random.Generator) -> np.ndarray:
    """Class of every node from multi-source BFS cells, balanced over classes (see module doc)."""
    num_nodes = len(indptr) - 1
    cell = np.full(num_nodes, -1, dtype=np.int64)
    if num_nodes == 0:
        return cell
    src = np.asarray(indices, dtype=np.int64)
    dst = np.repeat(np.arange(num_nodes, dtype=np.int64), np.diff(indptr))
    order = rng.permutation(src.size)  # random tie-breaking among equally near seeds
    src, dst = src[order], dst[order]
    touched = np.zeros(num_nodes, dtype=bool)
    touched[src] = True
    touched[dst] = True
    isolated = np.flatnonzero(~touched)
    num_cells = min(num_nodes, CELLS_PER_CLASS * num_classes)
    cell[isolated] = rng.integers(0, num_cells, isolated.size)

    next_cell = 0
    while True:
        unlabeled = np.flatnonzero(cell < 0)
        if unlabeled.size == 0:
            break
        # Seed (more) cells: the first round, and whenever the BFS stalls on unreached nodes.
        count = max(min(num_cells, unlabeled.size), unlabeled.size // 8)
        seeds = rng.choice(unlabeled, size=count, replace=False)
        cell[seeds] = (next_cell + np.arange(count)) % num_cells
        next_cell += count
        keep = cell[dst] < 0
        src, dst = src[keep], dst[keep]
        while src.size:
            reach = cell[src] >= 0
            if not reach.any():
                break
            # Each newly reached node takes the cell of its first reaching edge (edges are
            # shuffled, so ties are random); assigning in reverse makes the first one win.
            cell[dst[reach][::-1]] = cell[src[reach][::-1]]
            keep = cell[dst] < 0
            src, dst = src[keep], dst[keep]

    # Balance: biggest cells first, each to the class with the fewest nodes so far.
    sizes = np.bincount(cell, minlength=num_cells)
    cell_class = np.empty(num_cells, dtype=np.int64)
    load = np.zeros(num_classes, dtype=np.int64)
    for c in np.argsort(-sizes, kind="stable"):
        target = int(np.argmin(load))
        cell_class[c] = target
        load[target] += sizes[c]
    return cell_class[cell]


def propagate_labels(indptr: np.ndarray, indices: np.ndarray, labels: np.ndarray,
                     num_classes: int, rounds: int, rng: np.random.Generator) -> np.ndarray:
    """``rounds`` of synchronous majority vote over in-neighbours plus the node itself."""
    num_nodes = len(indptr) - 1
    dst = np.repeat(np.arange(num_nodes, dtype=np.int64), np.diff(indptr)) * num_classes
    rows = np.arange(num_nodes)
    for _ in range(rounds):
        votes = np.bincount(dst + labels[indices], minlength=num_nodes * num_classes)
        votes = votes.reshape(num_nodes, num_classes).astype(np.float32)
        votes[rows, labels] += 1.0
        votes += rng.random((num_nodes, num_classes), dtype=np.float32) * 0.5
        labels = votes.argmax(axis=1).astype(np.int64)
    return labels
