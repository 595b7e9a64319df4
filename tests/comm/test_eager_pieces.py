"""Which alltoallv messages go as pieces under the TCP eager limit, and the piece size setting
(the pieces themselves cross hosts in tests/cluster/test_cross_host_training.py)."""

from pathlib import Path

import pytest

import numpy as np

from gnnscale.comm.eager_pieces import (EAGER_PIECE_BYTES, EAGER_PIECES_MAX, check_piece_bytes,
                                        in_pieces, piece_bounds, piece_bytes_from_env)


def test_messages_of_two_to_four_pieces_are_split_and_others_go_whole():
    assert piece_bounds(0, 10) is None and piece_bounds(10, 10) is None  # fits one piece
    assert piece_bounds(11, 10) == [(0, 10), (10, 11)]
    assert piece_bounds(40, 10) == [(0, 10), (10, 20), (20, 30), (30, 40)]
    assert piece_bounds(41, 10) is None  # more than EAGER_PIECES_MAX pieces
    assert EAGER_PIECES_MAX == 4
    assert piece_bounds(25, 10, max_pieces=2) is None
    assert piece_bounds(25, 0) is None  # pieces off
    counts = np.array([0, 10, 11, 40, 41])  # one alltoallv's counts, the same rule per peer
    assert in_pieces(counts, 10).tolist() == [False, False, True, True, False]
    assert not in_pieces(counts, 0).any()


def test_pieces_cover_the_message_in_order():
    for count in range(EAGER_PIECE_BYTES // 4 + 1, 4 * EAGER_PIECE_BYTES // 4 + 1, 9973):
        bounds = piece_bounds(count, EAGER_PIECE_BYTES // 4)
        assert bounds[0][0] == 0 and bounds[-1][1] == count
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
        assert all(hi - lo <= EAGER_PIECE_BYTES // 4 for lo, hi in bounds)


def test_the_piece_size_comes_from_the_environment_or_the_default():
    assert piece_bytes_from_env({}) == 65536 - 256
    assert piece_bytes_from_env({"GNNSCALE_EAGER_PIECE_BYTES": "0"}) == 0
    assert piece_bytes_from_env({"GNNSCALE_EAGER_PIECE_BYTES": "261888"}) == 261888


@pytest.mark.parametrize("bad", ["-1", "64k", "", "1.5"])
def test_a_piece_size_that_is_not_a_byte_count_is_refused_with_its_name(bad):
    with pytest.raises(ValueError, match=f"GNNSCALE_EAGER_PIECE_BYTES must be a byte count "
                                         f">= 0, got '{bad}'"):
        piece_bytes_from_env({"GNNSCALE_EAGER_PIECE_BYTES": bad})
    with pytest.raises(ValueError, match="eager_piece_bytes must be"):
        check_piece_bytes(-5)
    with pytest.raises(ValueError, match="eager_piece_bytes must be"):
        check_piece_bytes(2.5)


def test_ranks_that_disagree_on_the_piece_size_fail_with_one_line(tmp_path):
    from mpi_launch import run_python_mpi

    script = tmp_path / "disagree.py"
    script.write_text(
        "import os, sys, torch\n"
        "rank = os.environ['OMPI_COMM_WORLD_RANK']\n"
        "os.environ['GNNSCALE_EAGER_PIECE_BYTES'] = '1024' if rank == '1' else '0'\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "from gnnscale.comm import init\n"
        "comm = init()\n"
        "try:\n"
        "    comm.alltoallv(torch.ones(2, 1), [1, 1], [1, 1])\n"
        "except ValueError as error:\n"
        "    print(f'rank {rank}: {error}', flush=True)\n"
        "    sys.exit(0)\n"
        "sys.exit(3)\n")
    done = run_python_mpi(2, script)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    for rank in (0, 1):
        assert f"rank {rank}: ranks disagree on GNNSCALE_EAGER_PIECE_BYTES ([0, 1024]): set it " \
               "alike on every host" in done.stdout
