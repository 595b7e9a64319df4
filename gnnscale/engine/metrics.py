"""Per-epoch records and the JSON-lines metrics file."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

from ..comm import Communicator

TIME_PARTS = ("forward_s", "backward_s", "halo_wait_s", "grad_allreduce_s", "optimizer_s",
              "eval_s")
# backward_s includes the exposed part of the overlapped gradient allreduce (grad_allreduce_s);
# compute_s = forward + backward - halo wait - grad_allreduce_s: the step's computing time


@dataclass
class EpochRecord:
    """What one epoch produced; ``time`` breaks ``epoch_time_s`` down (this rank's clock).

    ``metrics`` holds every computed ``{split}_{metric}`` (``val_f1``, ``test_auc``, ...);
    the accuracies are also fields of their own. An epoch without evaluation (``train
    --eval-every``) has the training loss, empty ``metrics`` and None accuracies.
    """

    epoch: int
    loss: float
    train_acc: float | None
    val_acc: float | None
    test_acc: float | None
    epoch_time_s: float
    time: dict = field(default_factory=dict)
    halo_bytes_sent: int = 0
    metrics: dict = field(default_factory=dict)
    peak_rss_mb: float = 0.0
    profile: dict = field(default_factory=dict)  # filled by --profile probes
    staleness: dict = field(default_factory=dict)  # policy, max/mean age of the halos used

    def to_json(self) -> dict:
        return asdict(self)

    @property
    def evaluated(self) -> bool:
        """Whether the model was evaluated after this epoch."""
        return bool(self.metrics)

    def has(self, name: str) -> bool:
        """Whether :meth:`value` knows ``name`` for this epoch (the loss always)."""
        return name == "loss" or name in self.metrics

    def value(self, name: str) -> float:
        """A metric by name (``loss``, ``val_acc``, ``val_f1``, ...)."""
        if name == "loss":
            return self.loss
        if name not in self.metrics:
            raise KeyError(f"metric {name!r} was not computed; computed: "
                           f"{', '.join(sorted(self.metrics))}")
        return self.metrics[name]


class MetricsWriter:
    """Writes one JSON object per line to ``path``; rank 0 writes, others hold no file.

    ``start``: records the file begins with (a resumed run passes the records of the epochs
    its checkpoint holds), written to a temporary file that then replaces ``path``, so an
    earlier run's lines past the checkpoint, or its summary, never stay behind. The folder of
    ``path`` is created.
    """

    def __init__(self, path: str | None, comm: Communicator, start=()):
        self.path = path if comm.rank == 0 else None
        self._file = None
        if self.path:
            parent = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(parent, exist_ok=True)
            tmp = os.path.join(parent, f".{os.path.basename(self.path)}.tmp-{os.getpid()}")
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.writelines(json.dumps(record) + "\n" for record in start)
            os.replace(tmp, self.path)
            self._file = open(self.path, "a", encoding="utf-8")

    def write(self, record: dict) -> None:
        if self._file:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file:
            self._file.close()
            self._file = None
