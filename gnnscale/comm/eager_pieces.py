"""Messages between hosts sent as pieces under the TCP eager limit.

Open MPI's TCP transport sends a message of at most ``btl_tcp_eager_limit`` bytes (64 KiB by
default) at once; a larger one sends its first fragment and waits for the receiver's
acknowledgement before the rest. When the two directions of an exchange between two hosts use
different protocols (one message under the limit, the other above it), the acknowledgement
queues behind the data on a slow link: on 2 hosts at 100 Mbit/s, an exchange of 74 KiB one way
and 60 KiB the other takes 1.5x as long as when both go at once. Sending each message of a few
times the limit as pieces that each fit under it removes the handshake: those exchanges take
0.65x as long at 100 Mbit/s and the same time or less at 1 and 10 Gbit/s. Longer messages go
whole, since at 10 Gbit/s a message of 16 pieces took 1.15x as long as one message
(``benchmarks/eager_pieces.py``).

Both ends of a message split it by its length alone, so they agree without talking.
"""

from __future__ import annotations

import os

#: bytes per piece: Open MPI's default TCP eager limit, less room for its message headers
EAGER_PIECE_BYTES = 65536 - 256
#: a message of more pieces than this goes whole
EAGER_PIECES_MAX = 4
ENV_EAGER_PIECE_BYTES = "GNNSCALE_EAGER_PIECE_BYTES"


def piece_bytes_from_env(environ=os.environ) -> int:
    """Piece size in bytes: ``$GNNSCALE_EAGER_PIECE_BYTES`` (0 sends every message whole; set
    it to the eager limit less 256 where ``btl_tcp_eager_limit`` is changed), else
    :data:`EAGER_PIECE_BYTES`."""
    text = environ.get(ENV_EAGER_PIECE_BYTES)
    return EAGER_PIECE_BYTES if text is None else check_piece_bytes(text, ENV_EAGER_PIECE_BYTES)


def check_piece_bytes(value, name: str = "eager_piece_bytes") -> int:
    """``value`` as a piece size in bytes (an integer >= 0), or a ValueError naming it."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = -1
    if number < 0 or isinstance(value, float) and value != number:
        raise ValueError(f"{name} must be a byte count >= 0, got {value!r}")
    return number


def in_pieces(counts, piece: int, max_pieces: int = EAGER_PIECES_MAX):
    """Whether a message of ``counts`` elements (a number or an array of them) goes as pieces
    of at most ``piece`` elements: it needs 2 to ``max_pieces`` of them, and ``piece`` is not 0
    (pieces off)."""
    return (piece > 0) & (counts > piece) & (counts <= max_pieces * piece)


def piece_bounds(count: int, piece: int, max_pieces: int = EAGER_PIECES_MAX) -> list | None:
    """``(start, stop)`` of each piece of a ``count``-element message sent as pieces of at most
    ``piece`` elements, or None when it goes whole (:func:`in_pieces`)."""
    count, piece = int(count), int(piece)
    if not in_pieces(count, piece, max_pieces):
        return None
    return [(start, min(start + piece, count)) for start in range(0, count, piece)]
