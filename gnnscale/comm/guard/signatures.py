"""Call signatures: what each rank is about to do, encoded so that one allgather compares them.

Checked mode exchanges a fixed-length int64 vector per call (:meth:`CallSignature.encode`);
:func:`find_mismatch` reads the gathered vectors and describes any disagreement, naming the
ranks and their calls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from ...errors import CommError
from .settings import MAX_SIGNED_COUNTS


class CollectiveMismatchError(CommError):
    """Ranks entered different collectives (kind, op, dtype, size, root or counts)."""



_KINDS = ("allreduce", "alltoallv", "allgather", "broadcast", "allgather_object", "barrier",
          "reduce", "split", "alloc_buffer")
_OPS = (None, "sum", "max", "min")
_DTYPES = (None, torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
           torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64,
           torch.complex128)
_HEADER = 9  # seq, kind, op, dtype, numel, root, row width, shape hash, path


_KIND_INDEX = {kind: index for index, kind in enumerate(_KINDS)}
_OP_INDEX = {op: index for index, op in enumerate(_OPS)}
_DTYPE_INDEX = {dtype: index for index, dtype in enumerate(_DTYPES)}


def signature_length(size: int) -> int:
    """Length of the int64 signature vector for a group of ``size`` ranks."""
    return _HEADER + 2 * min(size, MAX_SIGNED_COUNTS)


def fused_payload_bytes(size: int) -> int:
    """Bytes of data that ride along with each signature: 2 KiB (less for large groups), so
    one rank's share stays under the 4 KiB eager limit of shared-memory MPI transports."""
    return min(2048, 32768 // max(size, 1)) // 8 * 8


def exchange_length(size: int) -> int:
    """int64 words each rank contributes to a signature exchange: signature + payload slot."""
    return signature_length(size) + fused_payload_bytes(size) // 8


@dataclass(frozen=True)
class CallSignature:
    """What one rank is about to do: enough to tell whether all ranks agree."""

    kind: str
    op: str | None = None
    dtype: torch.dtype | None = None
    shape: tuple = ()
    root: int = -1
    send_counts: tuple | None = None
    recv_counts: tuple | None = None
    path: int = 0  # allreduce: 1 = over a shared-memory buffer from alloc_buffer

    def describe(self) -> str:
        """Human-readable form, e.g. ``allreduce(float32[1000], op=sum)``."""
        dtype = str(self.dtype).replace("torch.", "") if self.dtype is not None else "?"
        shape = "x".join(str(s) for s in self.shape) if self.shape else ""
        if self.kind in ("barrier", "allgather_object"):
            return f"{self.kind}()"
        if self.kind == "split":
            return "split()"
        if self.kind == "alltoallv":
            row = "x".join(str(s) for s in self.shape[1:]) or "1"
            return (f"alltoallv({dtype} rows of {row}, send_counts={list(self.send_counts)}, "
                    f"recv_counts={list(self.recv_counts)})")
        extra = f", op={self.op}" if self.op else ""
        extra += f", root={self.root}" if self.root >= 0 else ""
        extra += ", shared-memory buffer" if self.path == 1 else ""
        return f"{self.kind}({dtype}[{shape}]{extra})"

    def encode(self, seq: int, size: int, payload: np.ndarray | None = None) -> np.ndarray:
        """Fixed-length int64 vector (identical length on every rank of the group).

        The first :func:`signature_length` words are the signature; the rest (see
        :func:`exchange_length`) carry ``payload`` bytes, so a small allreduce can travel with
        its signature in one collective.
        """
        length = signature_length(size)
        shape = self.shape
        row = shape[1:] if self.kind == "alltoallv" else shape
        header = [seq, _KIND_INDEX[self.kind], _OP_INDEX[self.op],
                  _DTYPE_INDEX.get(self.dtype, len(_DTYPES)), math.prod(shape), self.root,
                  math.prod(row), hash(shape) & 0x3FFFFFFFFFFFFFFF, self.path]
        if self.send_counts is not None and size <= MAX_SIGNED_COUNTS:
            header += self.send_counts
            header += self.recv_counts
        else:
            header += [-1] * (length - _HEADER)
        vec = np.zeros(exchange_length(size), dtype=np.int64)
        vec[:length] = header
        if payload is not None:
            vec[length:].view(np.uint8)[:payload.size] = payload
        return vec

    @classmethod
    def decode(cls, vec: np.ndarray, size: int) -> tuple[int, "CallSignature"]:
        """Inverse of :meth:`encode` (the shape comes back as ``(numel,)`` or ``(rows, width)``)."""
        seq, kind, op, dtype, numel, root, row, _, path = (int(v) for v in vec[:_HEADER])
        counts = None, None
        if _KINDS[kind] == "alltoallv" and size <= MAX_SIGNED_COUNTS:
            counts = (tuple(int(c) for c in vec[_HEADER:_HEADER + size]),
                      tuple(int(c) for c in vec[_HEADER + size:_HEADER + 2 * size]))
        shape = (numel // max(row, 1), row) if _KINDS[kind] == "alltoallv" else (numel,)
        dtype_value = _DTYPES[dtype] if dtype < len(_DTYPES) else None
        return seq, cls(_KINDS[kind], _OPS[op], dtype_value, shape, root, *counts, path)


def find_mismatch(rows: np.ndarray, size: int, what: Callable[[], str] | str = "") -> str | None:
    """Compare the gathered signatures ``rows`` (``[size, L]``); describe a mismatch or None."""
    rows = np.asarray(rows).reshape(size, -1)[:, :signature_length(size)]
    first = rows[0]
    if first[1] != _KIND_INDEX["alltoallv"]:  # the common case: identical signatures
        packed = rows.tobytes()
        step = len(packed) // size
        if packed == packed[:step] * size:
            return None
    elif _alltoallv_agrees(rows, size):  # a halo exchange's, every step: kept cheap
        return None
    kinds = rows[:, 1]
    problem = None
    if np.any(kinds != first[1]) or np.any(rows[:, 0] != first[0]):
        problem = "different collectives"
    else:
        kind = _KINDS[int(first[1])]
        for index in _SHARED_FIELDS[kind]:
            if np.any(rows[:, index] != first[index]):
                problem = {2: "different reduction ops", 3: "different dtypes",
                           4: "different element counts", 5: "different roots",
                           6: "different row widths", 7: "different shapes",
                           8: "a shared-memory buffer from alloc_buffer on some ranks only"
                           }.get(index)
                break
        if problem is None and kind == "alltoallv" and size <= MAX_SIGNED_COUNTS:
            send = rows[:, _HEADER:_HEADER + size]
            recv = rows[:, _HEADER + size:_HEADER + 2 * size]
            bad = np.argwhere(send != recv.T)
            if bad.size:
                p, q = (int(v) for v in bad[0])
                problem = (f"inconsistent alltoallv counts: rank {p} sends {int(send[p, q])} rows "
                           f"to rank {q}, which expects {int(recv[q, p])}")
    if problem is None:
        return None
    calls: dict[str, list[int]] = {}
    for rank in range(size):
        try:
            seq, sig = CallSignature.decode(rows[rank], size)
            call = f"{sig.describe()} (call #{seq})"
        except (IndexError, ValueError):
            call = "an unreadable signature"
        calls.setdefault(call, []).append(rank)
    listing = "; ".join(f"{_ranks(ranks)}: {call}" for call, ranks in calls.items())
    what = what() if callable(what) else what
    return (f"collective mismatch{' on ' + what if what else ''} ({problem}): {listing}. "
            f"Every rank must make the same collective calls in the same order with matching "
            f"arguments")


#: per kind, the header words every rank's signature of that kind must share beside the
#: sequence number (an alltoallv's: kind, dtype, row width)
_SHARED_FIELDS = {"allreduce": (1, 2, 3, 4, 8), "reduce": (1, 2, 3, 4, 5),
                  "broadcast": (1, 3, 4, 5), "allgather": (1, 3, 4, 7), "alltoallv": (1, 3, 6),
                  "allgather_object": (1,), "barrier": (1,), "split": (1,),
                  "alloc_buffer": (1, 3, 4)}
_ALLTOALLV_SHARED = [0, *_SHARED_FIELDS["alltoallv"]]


def _alltoallv_agrees(rows: np.ndarray, size: int) -> bool:
    """Whether gathered alltoallv signatures agree: the shared header words, and (where the
    counts are signed) every rank's send counts are its peers' receive counts."""
    header = rows[:, _ALLTOALLV_SHARED]
    if not (header == header[0]).all():
        return False
    if size > MAX_SIGNED_COUNTS:
        return True
    counts = rows[:, _HEADER:_HEADER + 2 * size]
    return bool((counts[:, :size] == counts[:, size:].T).all())


def _ranks(ranks: Sequence[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if list(ranks) == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 3:
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ",".join(str(r) for r in ranks)
