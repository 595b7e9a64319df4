"""GCN of Kipf & Welling, "Semi-Supervised Classification with Graph Convolutional Networks"
(ICLR 2017), with the setting of the paper and its code (tkipf/gcn, ``train.py``/``models.py``):

- features row-normalised; public Planetoid split;
- two graph convolutions 16 hidden units wide, ReLU, no biases (the code's default), Glorot
  initialisation; dropout 0.5 on the input of both layers;
- Adam, learning rate 0.01, L2 weight decay 5e-4 on the first layer's weights only;
- at most 200 epochs, stopping once the validation loss (which includes the L2 term) exceeds
  the mean of the 10 epochs before it (after epoch 10);
- the reported number is the test accuracy of the model when training stops; the paper gives
  the mean of 100 runs with random initialisations (81.5 Cora, 70.3 CiteSeer, no deviation).
"""

from __future__ import annotations

import torch
from torch import nn

from ..engine import Trainer
from ..engine.adam import Adam
from ..nn import GCNLayer
from ..nn.dropout import relu_dropout
from .common import evaluate_with_loss
from .sparse_input import SparseInputLinear, as_csr, sparse_dropout

HIDDEN, DROPOUT, LR, WEIGHT_DECAY, EPOCHS, WINDOW = 16, 0.5, 0.01, 5e-4, 200, 10


class KipfGCN(nn.Module):
    """Two bias-free :class:`GCNLayer` s with ReLU, dropout before each; the first takes the
    features as a sparse matrix (:mod:`.sparse_input`), as the reference code does.

    Shapes: x ``[num_owned, in_dim]`` -> logits ``[num_owned, out_dim]``.
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, dropout: float):
        super().__init__()
        self.dropout = dropout
        self.layers = nn.ModuleList([GCNLayer(in_dim, hidden_dim, bias=False),
                                     GCNLayer(hidden_dim, out_dim, bias=False)])
        if not self.layers[0].transform_first:
            raise ValueError(f"the sparse first layer transforms first: hidden_dim "
                             f"{hidden_dim} must be below in_dim {in_dim}")
        self.layers[0].lin = SparseInputLinear(self.layers[0].lin)

    def forward(self, x, graph):
        x = sparse_dropout(as_csr(x), self.dropout, self.training)
        h = self.layers[0](x, graph)
        return self.layers[1](relu_dropout(h, self.dropout, self.training), graph)


def train_run(problem, comm, seed: int, max_epochs: int = EPOCHS) -> dict:
    """One run; returns the final test accuracy and how many epochs ran."""
    torch.manual_seed(seed)
    model = KipfGCN(problem.num_features, HIDDEN, problem.num_classes, DROPOUT)
    trainer = Trainer(model, problem, comm, lr=LR, weight_decay=0.0, seed=seed)
    first = model.layers[0].lin.weight
    trainer.optimizer = Adam(
        [{"params": [first], "weight_decay": WEIGHT_DECAY},
         {"params": list(model.layers[1].parameters()), "weight_decay": 0.0}], lr=LR)
    val_losses, metrics = [], {}
    for epoch in range(max_epochs):
        trainer.train_step()
        val_loss, metrics = evaluate_with_loss(trainer, "val")
        # the code's loss adds weight_decay * l2_loss(W0) = weight_decay * sum(W0^2) / 2
        val_losses.append(val_loss + WEIGHT_DECAY * 0.5 * float((first.detach() ** 2).sum()))
        window = val_losses[-(WINDOW + 1):-1]
        if epoch > WINDOW and val_losses[-1] > sum(window) / len(window):
            break
    return {"score": metrics["test_acc"], "epochs": len(val_losses),
            "val_score": metrics["val_acc"]}
