"""Checkpoints: model, optimiser, epoch, every rank's random state and the epoch records,
written atomically.

A checkpoint is one file written by rank 0 (model and optimiser are identical on every rank; the
per-rank random states are gathered into it). The payload is saved with ``torch.save``, then a
small header (format name, version, payload sha256 and length) is prepended, so a truncated,
altered or foreign file is refused before anything is unpickled, and loading uses
``torch.load(weights_only=True)``. Writes go to a temporary file beside the target, are fsynced,
then renamed over it: a crash mid-write leaves the previous checkpoint intact.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import torch

from ..errors import GnnscaleError

FORMAT = "gnnscale-checkpoint"
FORMAT_VERSION = 2  # 2: the epoch records (history) travel with the state
LATEST = "latest.pt"


class CheckpointError(GnnscaleError):
    """A checkpoint is missing, damaged, from another format version or another job shape."""


def _encode(state: dict) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getvalue()
    header = json.dumps({"format": FORMAT, "format_version": FORMAT_VERSION,
                         "sha256": hashlib.sha256(payload).hexdigest(),
                         "bytes": len(payload)}).encode()
    return len(header).to_bytes(4, "little") + header + payload


def write_atomic(path: Path, blob: bytes) -> None:
    """Write ``blob`` to ``path`` via a synced temporary file and a rename."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as handle:
            handle.write(blob)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def save_checkpoint(trainer, directory, keep_epoch_copy: bool = False,
                    settings: dict | None = None) -> Path | None:
    """Save the trainer's state to ``directory/latest.pt`` (collective; rank 0 writes).

    ``settings``: what the run was built from, ``{name: value}`` with plain values (str, int,
    float, bool, None), e.g. ``{"--model": "gcn", "--hidden": 16}``; :func:`load_checkpoint`
    refuses to resume a run whose settings differ, naming the first that does. Returns the
    path on rank 0, None elsewhere.
    """
    state = trainer.state_dict()  # collective: gathers every rank's RNG state
    if trainer.comm.rank != 0:
        return None
    if settings is not None:
        state["settings"] = dict(settings)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)  # mode from the user's umask
    blob = _encode(state)
    path = directory / LATEST
    write_atomic(path, blob)
    if keep_epoch_copy:
        write_atomic(directory / f"epoch-{state['epoch']:06d}.pt", blob)
    return path


def read_checkpoint(path) -> dict:
    """Read and verify a checkpoint file (a directory means its ``latest.pt``)."""
    path = Path(path)
    if path.is_dir():
        path = path / LATEST
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    blob = path.read_bytes()
    try:
        size = int.from_bytes(blob[:4], "little")
        header = json.loads(blob[4:4 + size])
        payload = blob[4 + size:]
    except (ValueError, UnicodeDecodeError):
        raise CheckpointError(f"{path} is not a gnnscale checkpoint (unreadable header)") \
            from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a gnnscale checkpoint")
    if header.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{path} has checkpoint format version "
                              f"{header.get('format_version')!r}; this gnnscale reads version "
                              f"{FORMAT_VERSION}")
    if len(payload) != header.get("bytes") or \
            hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise CheckpointError(f"{path} is truncated or altered (checksum mismatch)")
    try:
        return torch.load(io.BytesIO(payload), weights_only=True, map_location="cpu")
    except Exception as exc:  # weights-only refusal or a damaged payload
        raise CheckpointError(f"{path} cannot be loaded: {exc}") from None


def load_checkpoint(trainer, path, settings: dict | None = None) -> int:
    """Restore ``trainer`` from ``path``; returns the epoch it resumes after.

    ``settings``: this run's (as :func:`save_checkpoint` takes them); a setting both the
    checkpoint and this run name with different values is refused before anything is loaded
    (:class:`CheckpointError`, one line naming it and both values). A checkpoint without
    settings that does not fit the model is refused with one line from the first mismatch.
    """
    state = read_checkpoint(path)
    if state.get("num_ranks") != trainer.comm.size:
        raise CheckpointError(f"checkpoint {path} was written by {_ranks(state.get('num_ranks'))}; "
                              f"resume it with the same number of ranks "
                              f"({_ranks(trainer.comm.size)} started)")
    written = state.get("settings") or {}
    for name, value in (settings or {}).items():
        if name in written and written[name] != value:
            raise CheckpointError(f"checkpoint {path} was written with "
                                  f"{_setting(name, written[name])}; "
                                  f"this run has {_setting(name, value)} (resume with the "
                                  f"checkpoint's settings, or give another checkpoint folder)")
    try:
        trainer.load_state_dict(state)
    except (RuntimeError, KeyError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path} does not fit this model: "
                              f"{_first_mismatch(exc)} (resume with the model, width and "
                              f"dataset it was written with)") from None
    return trainer.epoch


def _setting(name: str, value) -> str:
    """``--hidden 16``; a switch as ``--residual`` or ``no --residual``; None as ``no --norm``."""
    if value is None or value is False:
        return f"no {name}"
    return name if value is True else f"{name} {value}"


def _first_mismatch(exc: Exception) -> str:
    """The first line that tells what differs in torch's many-line load_state_dict error."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if line.startswith("size mismatch for"):
            return line.rstrip(".")
    text = lines[0] if lines else type(exc).__name__
    for line in lines:
        for marker in ("Missing key(s)", "Unexpected key(s)"):
            if marker in line:
                text = line[line.index(marker):]
                break
    return text if len(text) <= 160 else text[:157] + "..."


def _ranks(count) -> str:
    return f"{count} rank" if count == 1 else f"{count} ranks"
