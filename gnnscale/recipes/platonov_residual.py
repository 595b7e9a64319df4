"""Residual GNNs of Platonov et al., "A critical look at the evaluation of GNNs under
heterophily: are we really making progress?" (ICLR 2023), with the defaults of their
``train.py`` (yandex-research/heterophilous-graphs):

- :class:`~gnnscale.nn.ResidualGNN` with GCN, SAGE or GAT blocks: hidden width 512, 5 blocks,
  8 heads, feed-forward multiplier 1, node-wise layer norm, dropout 0.2;
- AdamW, learning rate 3e-5, weight decay 0 (their parameter groups exempt biases and norms;
  with decay 0 nothing decays), no warm-up; 1000 full-batch steps;
- binary tasks (Tolokers, Minesweeper): one logit trained with BCE, scored by ROC AUC;
- run ``i`` uses data split ``i`` of the dataset's 10; each step is followed by an evaluation
  and the reported number of a run is the test metric at the step with the best validation
  metric (first best on ties); mean and sample deviation over the 10 runs.

The paper's table reports, per model, the number of blocks in 1..5 with the best mean
validation metric; these recipes use their ``train.py`` default of 5 (see the README).
"""

from __future__ import annotations

import torch

from ..engine import Trainer
from ..engine.adam import AdamW
from ..nn import ResidualGNN

HIDDEN, LAYERS, HEADS, DROPOUT, LR, WEIGHT_DECAY, STEPS = 512, 5, 8, 0.2, 3e-5, 0.0, 1000
NO_DECAY = ("bias", "normalization")  # their get_parameter_groups


def build_model(block: str, in_dim: int, num_classes: int, hidden: int = HIDDEN,
                layers: int = LAYERS) -> ResidualGNN:
    """Their model with ``block`` modules (``gcn``, ``sage`` or ``gat``)."""
    return ResidualGNN(block, in_dim, hidden, num_classes, num_layers=layers, dropout=DROPOUT,
                       norm="layer", num_heads=HEADS)


def parameter_groups(model: torch.nn.Module) -> list[dict]:
    """Their two AdamW groups: decayed weights, and biases and norms without decay."""
    named = list(model.named_parameters())
    exempt = [p for n, p in named if any(k in n for k in NO_DECAY)]
    decayed = [p for n, p in named if not any(k in n for k in NO_DECAY)]
    return [{"params": decayed}, {"params": exempt, "weight_decay": 0.0}]


def train_run(block: str, problem, comm, seed: int, max_epochs: int = STEPS,
              hidden: int = HIDDEN, layers: int = LAYERS) -> dict:
    """One run of ``max_epochs`` steps; the test AUC at the step with the best validation AUC."""
    torch.manual_seed(seed)
    model = build_model(block, problem.num_features, problem.num_classes, hidden, layers)
    metric = "auc" if problem.num_classes == 2 else "acc"
    trainer = Trainer(model, problem, comm, lr=LR, weight_decay=WEIGHT_DECAY, seed=seed,
                      metrics=(metric,))
    trainer.optimizer = AdamW(parameter_groups(model), lr=LR,
                                weight_decay=WEIGHT_DECAY)
    best_val, kept = -1.0, None
    for _ in range(max_epochs):
        trainer.train_step()
        _, metrics = trainer.evaluate()
        if metrics[f"val_{metric}"] > best_val:
            best_val, kept = metrics[f"val_{metric}"], metrics
    return {"score": kept[f"test_{metric}"], "epochs": max_epochs,
            "val_score": kept[f"val_{metric}"]}
