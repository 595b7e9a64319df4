"""Per-epoch records, global accuracy, and the JSON-lines metrics file."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

import torch

from ..comm import Communicator

TIME_PARTS = ("forward_s", "backward_s", "halo_wait_s", "grad_allreduce_s", "optimizer_s",
              "eval_s")


@dataclass
class EpochRecord:
    """What one epoch produced; ``time`` breaks ``epoch_time_s`` down (this rank's clock)."""

    epoch: int
    loss: float
    train_acc: float
    val_acc: float
    test_acc: float
    epoch_time_s: float
    time: dict = field(default_factory=dict)
    halo_bytes_sent: int = 0

    def to_json(self) -> dict:
        return asdict(self)


def global_loss_and_accuracy(local_loss: float, logits: torch.Tensor, y: torch.Tensor,
                             masks: dict, comm: Communicator) -> tuple[float, dict]:
    """Sum the loss and count correct predictions per split over all ranks (one allreduce)."""
    pred = logits.argmax(dim=-1)
    correct = pred == y
    values = [float(local_loss)]
    for split in ("train", "val", "test"):
        mask = masks[split]
        values += [float(correct[mask].sum()), float(mask.sum())]
    totals = comm.allreduce(torch.tensor(values, dtype=torch.float64)).tolist()
    accuracy = {}
    for i, split in enumerate(("train", "val", "test")):
        hits, count = totals[1 + 2 * i], totals[2 + 2 * i]
        accuracy[split] = hits / count if count else float("nan")
    return totals[0], accuracy


class MetricsWriter:
    """Appends one JSON object per line to ``path``; rank 0 writes, others hold no file."""

    def __init__(self, path: str | None, comm: Communicator):
        self.path = path if comm.rank == 0 else None
        self._file = None
        if self.path:
            parent = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(parent, exist_ok=True)
            self._file = open(self.path, "w", encoding="utf-8")

    def write(self, record: dict) -> None:
        if self._file:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file:
            self._file.close()
            self._file = None
