"""Quantized halo rows on 3 ranks through every path that sends them (quantized_driver.py):
int8 trains as float32 does to within its rounding, int2 trains, every step sends fewer bytes,
and a quantized run repeats bit for bit."""

from pathlib import Path

import numpy as np
import pytest

from mpi_launch import run_python_mpi
from quantized_driver import PATHS, STEPS

DRIVER = Path(__file__).with_name("quantized_driver.py")
RANKS = 3


@pytest.fixture(scope="module")
def results(datasets_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("quantized") / "r.npz"
    result = run_python_mpi(RANKS, DRIVER, [str(datasets_root), str(out)], timeout=840)
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(np.load(out))


@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", [p[0] for p in PATHS])
def test_int8_close_to_float32_and_int2_trains(results, path):
    exact = results[f"{path}/float32/losses"]
    assert exact.shape == (STEPS,) and exact[-1] < exact[0]
    # int8: a step of (max - min) / 255 per row, unbiased. The 5 training losses stay within
    # 1% of float32's; the logits after them within 6% of their largest magnitude (Adam's
    # normalised steps turn the small errors in near-zero gradient coordinates into weight
    # differences of up to a learning rate, so the logits drift further than the losses)
    np.testing.assert_allclose(results[f"{path}/int8/losses"], exact, rtol=1e-2)
    for rank in range(RANKS):
        full = results[f"{path}/float32/logits_rank{rank}"]
        int8 = results[f"{path}/int8/logits_rank{rank}"]
        assert np.abs(int8 - full).max() <= 6e-2 * max(np.abs(full).max(), 1.0)
    # and quantization did happen: not the float32 numbers
    assert not np.array_equal(results[f"{path}/int8/losses"], exact)
    # int2 runs: finite, and it learns (the loss falls over the 5 steps)
    int2 = results[f"{path}/int2/losses"]
    assert np.isfinite(int2).all() and int2[-1] < int2[0]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", [p[0] for p in PATHS])
def test_quantized_runs_repeat_bit_for_bit(results, path):
    np.testing.assert_array_equal(results[f"{path}/int8/losses"],
                                  results[f"{path}/int8-again/losses"])
    for rank in range(RANKS):
        np.testing.assert_array_equal(results[f"{path}/int8/logits_rank{rank}"],
                                      results[f"{path}/int8-again/logits_rank{rank}"])


@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", [p[0] for p in PATHS])
def test_quantized_steps_send_fewer_bytes(results, path):
    """16-wide rows: float32 64 bytes, int8 16 + 8, int2 4 + 8 (gradients alike); in
    4 column blocks, 4 columns: 16, 4 + 8 and 1 + 8. The training records count what went on
    the wire (local: nothing after the first step)."""
    full, int8, int2 = (results[f"{path}/{w}/bytes"] for w in ("float32", "int8", "int2"))
    assert (full > 0).all() if not path.endswith("local") else full[0] > 0
    sent = full > 0
    narrower = 0.8 if path.endswith("blocks") else 0.5
    assert (int8[sent] < narrower * full[sent]).all() and (int2[sent] < int8[sent]).all()
    assert (int8[~sent] == 0).all() and (int2[~sent] == 0).all()


@pytest.mark.timeout(600)
def test_metrics_file_reports_the_smaller_bytes(tmp_path, datasets_root):
    """`gnnscale train --halo-dtype int2`: each epoch record and each rank's summary count the
    bytes that went on the wire, under half of float32's (rows and gradients 4 + 8 bytes per
    16 values against 64)."""
    import json

    from mpi_launch import gnnscale_cli_many

    runs = {}
    args = {dtype: ["train", "--dataset", "cora", "--data-root", str(datasets_root),
                    "--epochs", "2", "--halo-dtype", dtype,
                    "--metrics-out", str(tmp_path / f"{dtype}.jsonl")]
            for dtype in ("float32", "int2")}
    for dtype, result in zip(args, gnnscale_cli_many(2, list(args.values()), timeout=500)):
        assert result.returncode == 0, result.stderr[-3000:]
        lines = [json.loads(line) for line in (tmp_path / f"{dtype}.jsonl").read_text()
                 .splitlines()]
        runs[dtype] = ([line["halo_bytes_sent"] for line in lines if "epoch" in line
                        and "halo_bytes_sent" in line],
                       [rank["halo_bytes_per_epoch"] for rank in lines[-1]["per_rank"]])
    (full_epochs, full_ranks), (int2_epochs, int2_ranks) = runs["float32"], runs["int2"]
    assert len(full_epochs) == len(int2_epochs) == 2 and min(full_epochs) > 0
    assert all(0 < q < 0.5 * f for q, f in zip(int2_epochs, full_epochs))
    assert all(0 < q < 0.5 * f for q, f in zip(int2_ranks, full_ranks))
