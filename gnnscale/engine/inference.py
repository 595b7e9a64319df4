"""Distributed full-graph inference: predictions for every node, gathered or per part."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from .checkpoint import write_atomic

LAYOUTS = ("gathered", "per-part")


def _npz_bytes(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def gather_predictions(trainer) -> tuple[np.ndarray, np.ndarray] | None:
    """(logits [N, C], predicted class [N]) in global node order on rank 0; None elsewhere.

    Collective. Nodes are ordered by global id whatever the partition.
    """
    logits = trainer.predict().float().cpu().numpy()
    owned = trainer.problem.graph.owned_nodes
    pieces = trainer.comm.allgather_object((owned, logits))
    if trainer.comm.rank != 0:
        return None
    num_nodes = sum(len(ids) for ids, _ in pieces)
    full = np.zeros((num_nodes, logits.shape[1]), dtype=np.float32)
    for ids, part_logits in pieces:
        full[ids] = part_logits
    return full, full.argmax(axis=1)


def write_predictions(trainer, path, layout: str = "gathered") -> Path:
    """Write predictions for every node (collective).

    ``gathered``: rank 0 writes one ``.npz`` at ``path`` with ``node_ids``, ``logits``, ``pred``.
    ``per-part``: ``path`` is a folder; each rank writes ``part-<rank>.npz`` with its owned
    nodes' ``node_ids``, ``logits`` and ``pred`` (no gathering: memory stays per part).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown predictions layout {layout!r}; choose {', '.join(LAYOUTS)}")
    path = Path(path)
    if layout == "per-part":
        path.mkdir(parents=True, exist_ok=True)
        logits = trainer.predict().float().cpu().numpy()
        target = path / f"part-{trainer.comm.rank:05d}.npz"
        write_atomic(target, _npz_bytes(node_ids=trainer.problem.graph.owned_nodes,
                                        logits=logits, pred=logits.argmax(axis=1)))
        trainer.comm.barrier()
        return target
    gathered = gather_predictions(trainer)
    if gathered is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        logits, pred = gathered
        write_atomic(path, _npz_bytes(node_ids=np.arange(len(pred)), logits=logits, pred=pred))
    trainer.comm.barrier()
    return path
