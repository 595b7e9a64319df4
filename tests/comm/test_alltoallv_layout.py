"""The layout an alltoallv posts, worked out once per counts (gnnscale/comm/alltoallv_layout.py)."""

import numpy as np
import pytest
import torch

from gnnscale.comm.alltoallv_layout import MAX_LAYOUTS, Layouts
from gnnscale.comm.eager_pieces import piece_bounds
from gnnscale.comm.guard import CallSignature


def test_pieces_to_other_hosts_are_cut_from_the_flat_buffers_and_leave_the_collective():
    """Rank 0 of 3, rank 2 on another host: its messages of 2-4 pieces go as pieces (counted 0
    in the collective), the one on this host and one too long stay in the collective."""
    send = torch.zeros(10 + 3 + 40, 4)  # rows 4 wide: 40 values a piece of 10 rows
    elsewhere = np.array([False, False, True])
    layout = Layouts(3, signed=True).get(send, [10, 3, 40], [2, 30, 25], elsewhere,
                                         piece_bytes=40 * 4)
    assert layout.s_counts.tolist() == [40, 12, 0] and layout.s_displs.tolist() == [0, 40, 52]
    assert layout.r_counts.tolist() == [8, 120, 0] and layout.r_displs.tolist() == [0, 8, 128]
    sent = [(lo, hi) for receive, peer, lo, hi in layout.pieces if not receive and peer == 2]
    got = [(lo, hi) for receive, peer, lo, hi in layout.pieces if receive and peer == 2]
    assert sent == [(52 + lo, 52 + hi) for lo, hi in piece_bounds(160, 40)]
    assert got == [(128 + lo, 128 + hi) for lo, hi in piece_bounds(100, 40)]
    assert (layout.send_rows, layout.recv_rows) == (53, 57)


def test_without_peers_elsewhere_every_message_stays_in_the_collective():
    send = torch.zeros(6, 2)
    layout = Layouts(2, signed=False).get(send, [2, 4], [3, 3], None, piece_bytes=8)
    assert layout.pieces == [] and layout.s_counts.tolist() == [4, 8]
    assert layout.encoded is None


def test_the_kept_signature_encodes_as_a_fresh_one_and_layouts_are_reused():
    layouts = Layouts(2, signed=True)
    send = torch.zeros(5, 3, dtype=torch.float64)
    layout = layouts.get(send, [2, 3], [4, 1], None, 0)
    fresh = CallSignature("alltoallv", None, torch.float64, (5, 3), -1, (2, 3), (4, 1))
    assert np.array_equal(layout.encoded, fresh.encode(0, 2))
    assert layouts.get(torch.ones(5, 3, dtype=torch.float64), [2, 3], [4, 1], None, 0) \
        is layout
    assert layouts.get(send.float(), [2, 3], [4, 1], None, 0) is not layout  # another dtype


def test_counts_that_do_not_match_the_rows_are_refused_each_call():
    layouts = Layouts(2, signed=True)
    layouts.get(torch.zeros(5, 1), [2, 3], [1, 1], None, 0)
    with pytest.raises(ValueError, match="send has 4 rows but send_counts sum to 5"):
        layouts.get(torch.zeros(4, 1), [2, 3], [1, 1], None, 0)
    with pytest.raises(ValueError, match="negative"):
        layouts.get(torch.zeros(1, 1), [2, -1], [1, 1], None, 0)


def test_the_oldest_layout_goes_when_too_many_are_kept():
    layouts = Layouts(2, signed=False)
    first = layouts.get(torch.zeros(1, 1), [1, 0], [0, 1], None, 0)
    for rows in range(2, MAX_LAYOUTS + 2):
        layouts.get(torch.zeros(rows, 1), [rows, 0], [0, 1], None, 0)
    assert layouts.get(torch.zeros(1, 1), [1, 0], [0, 1], None, 0) is not first
