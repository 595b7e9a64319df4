"""The time model's constants for a model's outputs (``gnnscale tune --calibrate``): the
training loss and the evaluation's metrics, per row and per logit.

A step ends in the cross-entropy over the training rows (forward and backward,
``Trainer._summed_train_loss``), an evaluation in the metrics over every row (the argmax and
each split's counts, :func:`gnnscale.engine.evaluation.evaluate_global`). Both cost mostly per
row at a model's few classes (amazon0601's 4: 116-155 ns per row for the loss here, where 10
elementwise ops per logit come to 16 ns), so each is timed at
several class counts and fitted as ``rows (per row + per logit x classes)``, as the
aggregation is per non-zero and per value (:func:`~gnnscale.cli.calibrate.per_edge_and_value`,
which the calibration passes in with its timer: this module imports nothing of it).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

#: the class counts the outputs are timed at (a model's classes: a few to a hundred)
OUTPUT_CLASSES = (4, 16, 64)
#: rows of each timed output (shrunk by the calibration's ``scale``): 12.8 MB of logits at 64
#: classes, a fraction of a millisecond per call at the narrowest
OUTPUT_ROWS = 50_000


def output_constants(time_in_turns, fit, scale: float = 1.0) -> dict:
    """``gamma_loss_row``/``gamma_loss_logit`` (seconds per training row and per logit of the
    loss, forward and backward) and ``gamma_eval_row``/``gamma_eval_logit`` (per row and per
    logit of the evaluation's metrics), with the thread count already set.

    ``time_in_turns(calls, what=...)``: each call's median seconds, the calls taking turns
    (:func:`gnnscale.cli.calibrate._interleaved_median_times`); ``fit(rows, classes,
    seconds)``: ``(per row, per logit)`` (:func:`gnnscale.cli.calibrate.per_edge_and_value`).
    """
    from ..comm.single import SingleCommunicator
    from ..engine.evaluation import SPLITS, evaluate_global

    rows = max(1000, int(OUTPUT_ROWS * scale))
    generator = torch.Generator().manual_seed(0)
    comm = SingleCommunicator()
    split = torch.randint(0, len(SPLITS), (rows,), generator=generator)
    masks = {name: split == i for i, name in enumerate(SPLITS)}
    losses, metrics = [], []
    for classes in OUTPUT_CLASSES:
        logits = torch.empty(rows, classes).uniform_(-1.0, 1.0, generator=generator)
        logits.requires_grad_()
        labels = torch.randint(0, classes, (rows,), generator=generator)

        def loss(logits=logits, labels=labels):
            logits.grad = None
            F.cross_entropy(logits, labels, reduction="sum").backward()

        def metric(logits=logits.detach(), labels=labels, classes=classes):
            evaluate_global(0.0, logits, labels, masks, classes, comm)

        losses.append(loss)
        metrics.append(metric)
    counts = [rows] * len(OUTPUT_CLASSES)
    loss_row, loss_logit = fit(counts, OUTPUT_CLASSES, time_in_turns(losses, what="loss"))
    eval_row, eval_logit = fit(counts, OUTPUT_CLASSES, time_in_turns(metrics, what="metrics"))
    return {"gamma_loss_row": loss_row, "gamma_loss_logit": loss_logit,
            "gamma_eval_row": eval_row, "gamma_eval_logit": eval_logit}
