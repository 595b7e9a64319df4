"""GAT of Veličković et al., "Graph Attention Networks" (ICLR 2018), transductive setting of
the paper (Section 3.3) and its code (PetarV-/GAT, ``execute_cora.py``):

- features row-normalised; public Planetoid split;
- a hidden layer of 8 heads x 8 features (concatenated), ELU; an output layer of 1 head;
  dropout 0.6 on both layers' inputs and on the normalised attention coefficients;
- Adam, learning rate 0.005, L2 weight decay 5e-4 on every parameter (the code's ``lossL2``);
- early stopping with patience 100 epochs on the validation loss and accuracy together: the
  patience counter resets whenever either improves (accuracy >=, loss <=), and the model is
  kept when both do; the reported number is that kept model's test accuracy. The paper gives
  the mean and deviation of 100 runs (Cora 83.0 +- 0.7, CiteSeer 72.5 +- 0.7) and uses the
  same setting for CiteSeer.

``as_in_code=True`` (the ``gat-velickovic-code-*`` recipes) adds the two dropouts the reference
code applies beyond the paper's text: each head draws its own dropout mask on the layer's input
(``attn_head`` drops its input itself), and each head's transformed features are dropped (0.6)
where they are aggregated, not where the attention terms are computed (``seq_fts``).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ..engine import Trainer
from ..nn import GATLayer
from ..nn.dropout import dropout as fast_dropout
from .common import evaluate_with_loss
from .sparse_input import SparseInputLinear, as_csr, linear_map, sparse_dropout

HEADS, HIDDEN, DROPOUT, LR, WEIGHT_DECAY, PATIENCE = 8, 8, 0.6, 0.005, 5e-4, 100
MAX_EPOCHS = 100_000  # the code's nb_epochs; patience ends every run long before


class VelickovicGAT(nn.Module):
    """The paper's two-layer GAT: :class:`GATLayer` (8 x 8, concatenated), ELU,
    :class:`GATLayer` (1 head); dropout on each layer's input and on the attention. The first
    layer takes the features as a sparse matrix (:mod:`.sparse_input`).

    Shapes: x ``[num_owned, in_dim]`` -> logits ``[num_owned, num_classes]``.
    """

    def __init__(self, in_dim: int, num_classes: int, as_in_code: bool = False):
        super().__init__()
        values = DROPOUT if as_in_code else 0.0
        self.layers = nn.ModuleList([
            GATLayer(in_dim, HIDDEN, heads=HEADS, concat=True, dropout=DROPOUT,
                     value_dropout=values),
            GATLayer(HEADS * HIDDEN, num_classes, heads=1, concat=False, dropout=DROPOUT,
                     value_dropout=values)])
        linear = SparseInputLinear(self.layers[0].lin)
        self.layers[0].lin = PerHeadInputDropout(linear, HEADS, DROPOUT) if as_in_code \
            else linear
        self.as_in_code = as_in_code

    def forward(self, x, graph):
        x = as_csr(x) if self.as_in_code else sparse_dropout(as_csr(x), DROPOUT, self.training)
        h = F.elu(self.layers[0](x, graph))
        return self.layers[1](fast_dropout(h, DROPOUT, self.training), graph)


class PerHeadInputDropout(nn.Module):
    """A bias-free linear map to ``heads`` blocks of columns, each computed from its own
    dropout of the (sparse CSR or dense) input while training, as the reference code's heads
    each drop their input. The wrapped map's ``weight`` keeps its name.
    Shapes: ``[N, F_in]`` -> ``[N, heads * C]``."""

    def __init__(self, linear: SparseInputLinear, heads: int, p: float):
        super().__init__()
        self.weight, self.heads, self.p = linear.weight, heads, p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return linear_map(x, self.weight)
        blocks = self.weight.chunk(self.heads, dim=0)
        drop = sparse_dropout if x.layout == torch.sparse_csr else fast_dropout
        return torch.cat([linear_map(drop(x, self.p, True), w) for w in blocks], dim=1)


def train_run(problem, comm, seed: int, max_epochs: int = MAX_EPOCHS,
              as_in_code: bool = False) -> dict:
    """One run; returns the kept model's test accuracy and how many epochs ran."""
    torch.manual_seed(seed)
    model = VelickovicGAT(problem.num_features, problem.num_classes, as_in_code)
    trainer = Trainer(model, problem, comm, lr=LR, weight_decay=WEIGHT_DECAY, seed=seed)
    best_acc, best_loss, since, kept, epochs = 0.0, math.inf, 0, None, 0
    while epochs < max_epochs:
        trainer.train_step()
        epochs += 1
        val_loss, metrics = evaluate_with_loss(trainer, "val")
        val_acc = metrics["val_acc"]
        if val_acc >= best_acc or val_loss <= best_loss:
            if val_acc >= best_acc and val_loss <= best_loss:
                kept = metrics  # the code saves the model here and tests it at the end
            best_acc, best_loss, since = max(val_acc, best_acc), min(val_loss, best_loss), 0
        else:
            since += 1
            if since == PATIENCE:
                break
    return {"score": kept["test_acc"], "epochs": epochs, "val_score": kept["val_acc"]}
