"""Seeded train/validation/test splits for generated and structure-only graphs."""

from __future__ import annotations

import numpy as np

from gnnscale.errors import DataError


def per_class_split(labels: np.ndarray, num_classes: int, train_per_class: int, num_val: int,
                    num_test: int, rng: np.random.Generator):
    """Planetoid-style split: ``train_per_class`` nodes per class, then validation and test.

    A class contributes at most half its labeled nodes to training (at least one if it has any).
    Validation and test come from the remaining labeled nodes in random order; when fewer remain
    than ``num_val + num_test``, both shrink in proportion. Nodes with label -1 are never in a mask.
    Returns three disjoint bool masks.
    """
    n = labels.shape[0]
    order = rng.permutation(n)
    order = order[labels[order] >= 0]
    shuffled_labels = labels[order]
    # Rank of every node within its class in the shuffled order (stable sort keeps the shuffle).
    by_class = np.argsort(shuffled_labels, kind="stable")
    class_sizes = np.bincount(shuffled_labels, minlength=num_classes)
    class_start = np.concatenate([[0], np.cumsum(class_sizes)[:-1]])
    rank = np.empty(order.size, dtype=np.int64)
    rank[by_class] = np.arange(order.size) - class_start[shuffled_labels[by_class]]
    quota = np.where(class_sizes > 0, np.clip(class_sizes // 2, 1, train_per_class), 0)
    in_train = rank < quota[shuffled_labels]

    rest = order[~in_train]
    want = num_val + num_test
    if want > rest.size:
        num_val = int(rest.size * num_val / want) if want else 0
        num_test = rest.size - num_val if want else 0
        num_test = min(num_test, rest.size - num_val)
    return (_mask(n, order[in_train]), _mask(n, rest[:num_val]),
            _mask(n, rest[num_val:num_val + num_test]))


def fraction_split(num_nodes: int, train_fraction: float, val_fraction: float,
                   test_fraction: float, rng: np.random.Generator, labeled=None):
    """Random split by fractions of the (labeled) nodes; returns three disjoint bool masks."""
    candidates = np.arange(num_nodes) if labeled is None else np.flatnonzero(labeled)
    order = rng.permutation(candidates)
    n_train = max(1, int(round(train_fraction * order.size))) if order.size else 0
    n_val = int(round(val_fraction * order.size))
    n_test = min(int(round(test_fraction * order.size)), order.size - n_train - n_val)
    return (_mask(num_nodes, order[:n_train]), _mask(num_nodes, order[n_train:n_train + n_val]),
            _mask(num_nodes, order[n_train + n_val:n_train + n_val + max(n_test, 0)]))


#: the mask arrays a node-data file may store, all three or none
MASK_KEYS = ("train_mask", "val_mask", "test_mask")


def stored_or_drawn_split(found, masks, pick, *, num_nodes: int, split: int, seed: int,
                          labeled, origin):
    """The train/val/test masks of a file: those it stores, or a seeded 50/25/25 split.

    ``found``: the keys of :data:`MASK_KEYS` the file has (all or none, else a DataError
    naming ``origin``) and ``masks`` their arrays; ``pick(mask, key)`` returns split ``split``
    of a stored mask. Without stored masks, ``fraction_split`` of the ``labeled`` nodes, seeded
    by ``seed`` and ``split``.
    """
    if found and len(found) != len(MASK_KEYS):
        raise DataError(f"{origin} has {', '.join(found)} but not all of {', '.join(MASK_KEYS)}")
    if found:
        return [pick(mask, key) for key, mask in zip(found, masks)]
    return list(fraction_split(num_nodes, 0.5, 0.25, 0.25,
                               np.random.default_rng([seed, 1, split]), labeled=labeled))


def _mask(n: int, ids: np.ndarray) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[ids] = True
    return mask
