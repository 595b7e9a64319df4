"""Metrics over the whole graph, computed from every rank's share with few collectives.

Accuracy and macro-F1 come from counts (correct, per-class true/false positives and false
negatives) summed with one allreduce. ROC AUC (binary tasks) needs the global ranking of scores,
so each rank's scores are gathered (small: one float per evaluated node) and ranked with ties
averaged (the Mann-Whitney statistic), as scikit-learn's ``roc_auc_score`` computes it.
"""

from __future__ import annotations

import numpy as np
import torch

from ..comm import Communicator

METRICS = ("acc", "f1", "auc")
SPLITS = ("train", "val", "test")


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` for binary ``labels`` (nan if one class only)."""
    labels = np.asarray(labels).astype(bool)
    positives, negatives = int(labels.sum()), int((~labels).sum())
    if positives == 0 or negatives == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = np.asarray(scores)[order]
    ranks = np.empty(len(scores), dtype=np.float64)
    # average ranks over ties
    _, starts, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    mean_rank = starts + (counts + 1) / 2.0
    ranks[order] = np.repeat(mean_rank, counts)
    return float((ranks[labels].sum() - positives * (positives + 1) / 2.0)
                 / (positives * negatives))


def macro_f1(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> float:
    """Unweighted mean of per-class F1 over classes that occur (in labels or predictions)."""
    present = (tp + fp + fn) > 0
    if not present.any():
        return float("nan")
    f1 = 2 * tp[present] / (2 * tp[present] + fp[present] + fn[present])
    return float(f1.mean())


def evaluate_global(local_loss: float, logits: torch.Tensor, y: torch.Tensor, masks: dict,
                    num_classes: int, comm: Communicator, metrics=("acc",)) -> tuple[float, dict]:
    """Global loss and ``{split}_{metric}`` for every split and requested metric.

    ``local_loss`` is this rank's share of the loss (shares add up to the global loss).
    """
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric {unknown[0]!r}; choose from {', '.join(METRICS)}")
    # Counting is cheap and collectives take CPU tensors on the MPI backend: count on the CPU.
    logits, y = logits.detach().cpu(), y.cpu()
    masks = {split: mask.cpu() for split, mask in masks.items()}
    pred = logits.argmax(dim=-1)
    counts = [torch.tensor([float(local_loss)], dtype=torch.float64)]
    for split in SPLITS:
        mask = masks[split]
        p, t = pred[mask], y[mask]
        per_class = [float((p == t).sum()), float(mask.sum())]
        counts.append(torch.tensor(per_class, dtype=torch.float64))
        if "f1" in metrics:
            tp = torch.bincount(t[p == t], minlength=num_classes)[:num_classes]
            predicted = torch.bincount(p, minlength=num_classes)[:num_classes]
            actual = torch.bincount(t, minlength=num_classes)[:num_classes]
            counts.append(torch.cat([tp, predicted - tp, actual - tp]).double())
    totals = comm.allreduce(torch.cat(counts)).numpy()
    loss, offset, result = float(totals[0]), 1, {}
    for split in SPLITS:
        hits, count = totals[offset], totals[offset + 1]
        offset += 2
        result[f"{split}_acc"] = hits / count if count else float("nan")
        if "f1" in metrics:
            tp, fp, fn = totals[offset:offset + 3 * num_classes].reshape(3, num_classes)
            offset += 3 * num_classes
            result[f"{split}_f1"] = macro_f1(tp, fp, fn)
    if "auc" in metrics:
        result.update(_global_auc(logits, y, masks, comm))
    return loss, result


def _global_auc(logits: torch.Tensor, y: torch.Tensor, masks: dict, comm: Communicator) -> dict:
    if logits.shape[1] != 2:
        raise ValueError(f"ROC AUC is for binary tasks; the model has {logits.shape[1]} classes")
    score = torch.softmax(logits.double(), dim=-1)[:, 1].numpy()
    labels = y.numpy()
    local = {s: (score[masks[s].numpy()], labels[masks[s].numpy()]) for s in SPLITS}
    gathered = comm.allgather_object(local)
    result = {}
    for split in SPLITS:
        scores = np.concatenate([g[split][0] for g in gathered])
        truth = np.concatenate([g[split][1] for g in gathered])
        result[f"{split}_auc"] = roc_auc(scores, truth == 1)
    return result
