"""What an alltoallv of given counts posts, worked out once and reused.

A halo exchange posts the same counts every step (a plan's send and receive counts), so
everything that follows from the counts alone is kept per layout: the counts and
displacements in elements, which messages go to other hosts as pieces under the TCP eager
limit (:mod:`.eager_pieces`) and where those pieces lie, and the call's signature for checked
mode. Working these out with NumPy on every post cost more than MPI's own post
(``benchmarks/exchange_post.py``).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from .base import check_alltoallv
from .eager_pieces import in_pieces, piece_bounds
from .guard import CallSignature

#: layouts a communicator keeps (a model exchanges a few; the oldest goes first)
MAX_LAYOUTS = 64


class AlltoallvLayout:
    """An alltoallv of ``send_counts`` rows out and ``recv_counts`` rows in, rows of
    ``row_shape``: element counts and displacements of the collective (messages that go as
    pieces counted 0 there), the pieces ``(receive?, peer, start, stop)`` in elements of the
    flat buffers, and the call's :class:`CallSignature` and its encoding (sequence number 0)."""

    __slots__ = ("send_rows", "recv_rows", "s_counts", "s_displs", "r_counts", "r_displs", "pieces",
                 "signature", "encoded")

    def __init__(self, send_counts: list, recv_counts: list, row_shape: tuple,
                 dtype: torch.dtype, elsewhere: np.ndarray | None, piece_elems: int,
                 size: int, signed: bool):
        row = math.prod(row_shape)
        self.send_rows, self.recv_rows = sum(send_counts), sum(recv_counts)
        s_counts = np.asarray(send_counts, dtype=np.int64) * row
        r_counts = np.asarray(recv_counts, dtype=np.int64) * row
        self.s_displs = np.concatenate(([0], np.cumsum(s_counts)[:-1]))
        self.r_displs = np.concatenate(([0], np.cumsum(r_counts)[:-1]))
        self.pieces = []
        if elsewhere is not None and piece_elems:
            for receive, counts, displs in ((True, r_counts, self.r_displs),
                                            (False, s_counts, self.s_displs)):
                for peer in np.flatnonzero(elsewhere & in_pieces(counts, piece_elems)):
                    base = int(displs[peer])
                    self.pieces += [(receive, int(peer), base + lo, base + hi)
                                    for lo, hi in piece_bounds(counts[peer], piece_elems)]
                    counts[peer] = 0
        self.s_counts, self.r_counts = s_counts, r_counts
        self.signature = CallSignature("alltoallv", None, dtype, (self.send_rows, *row_shape),
                                       -1, tuple(send_counts), tuple(recv_counts))
        self.encoded = self.signature.encode(0, size) if signed else None


class Layouts:
    """A communicator's layouts by counts, row shape and dtype; counts are checked
    (:func:`check_alltoallv`) when a layout is first made and the rows sent on every call."""

    def __init__(self, size: int, signed: bool):
        self.size, self.signed = size, signed
        self._kept: dict = {}

    def get(self, send: torch.Tensor, send_counts: Sequence[int], recv_counts: Sequence[int],
            elsewhere, piece_bytes: int) -> AlltoallvLayout:
        """The layout of posting ``send`` (rows grouped by peer) with these counts;
        ``elsewhere``: per rank, on another host (None: pieces off); ``piece_bytes``."""
        key = (tuple(send_counts), tuple(recv_counts), tuple(send.shape[1:]), send.dtype)
        layout = self._kept.get(key)
        if layout is None:
            send_counts, recv_counts = check_alltoallv(send, send_counts, recv_counts,
                                                       self.size)
            layout = AlltoallvLayout(send_counts, recv_counts, tuple(send.shape[1:]),
                                     send.dtype, elsewhere, piece_bytes // send.element_size(),
                                     self.size, self.signed)
            if len(self._kept) >= MAX_LAYOUTS:
                self._kept.pop(next(iter(self._kept)))
            self._kept[key] = layout
        elif send.shape[0] != layout.send_rows:
            check_alltoallv(send, send_counts, recv_counts, self.size)  # raises, naming them
        return layout
