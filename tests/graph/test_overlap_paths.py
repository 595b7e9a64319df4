"""The overlapped exchange gives the same numbers as waiting at once and as exchanging in
column blocks; bf16 halos stay close."""

from pathlib import Path

import numpy as np
import pytest

from mpi_launch import run_python_mpi

DRIVER = Path(__file__).with_name("overlap_driver.py")


@pytest.mark.timeout(300)
def test_overlap_waited_and_bf16_paths(tmp_path, datasets_root):
    out = tmp_path / "r.npz"
    result = run_python_mpi(3, DRIVER, [str(datasets_root), str(out)], timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    r = np.load(out)
    for model in ("gcn", "sage", "sage-max", "gat"):
        # identical arithmetic, only the waiting moves: bit-for-bit equal
        # and the same when the rows travel in column blocks (several per exchange)
        for other in ("waited", "blocks", "blocks-waited"):
            np.testing.assert_array_equal(r[f"{model}/overlap/losses"],
                                          r[f"{model}/{other}/losses"])
        for rank in range(3):
            exact = r[f"{model}/overlap/logits_rank{rank}"]
            for other in ("waited", "blocks", "blocks-waited"):
                np.testing.assert_array_equal(exact, r[f"{model}/{other}/logits_rank{rank}"])
            # bf16 on the wire: ~3 significant digits per halo row
            bf16 = r[f"{model}/bf16/logits_rank{rank}"]
            assert np.abs(bf16 - exact).max() <= 2e-2 * np.abs(exact).max()
        np.testing.assert_allclose(r[f"{model}/bf16/losses"], r[f"{model}/overlap/losses"],
                                   rtol=1e-2)
