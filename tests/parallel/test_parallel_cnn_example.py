"""examples/cnn_data_parallel.py runs under mpirun and reports throughput and the comm split."""

import json

from mpi_launch import REPO_ROOT, run_python_mpi

EXAMPLE = REPO_ROOT / "examples" / "cnn_data_parallel.py"


def test_cnn_example_two_ranks_lars_warmup_bf16(tmp_path):
    out = tmp_path / "records.json"
    result = run_python_mpi(2, EXAMPLE, [
        "--steps", "3", "--batch-size", "4", "--log-every", "1", "--optimizer", "lars",
        "--warmup-steps", "2", "--label-smoothing", "0.1", "--precision", "bf16",
        "--accumulate", "2", "--compression", "bf16", "--json", str(out)],
        timeout=180, env={"GNNSCALE_CACHE_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "on 2 rank(s), backend mpi" in result.stdout
    assert "img/s" in result.stdout and "exposed" in result.stdout and "hidden" in result.stdout
    records = json.loads(out.read_text())["records"]
    assert len(records) == 3
    assert records[0]["lr"] < records[1]["lr"]  # warming up
    for record in records:
        assert record["images_per_s"] > 0 and 0.0 <= record["hidden_fraction"] <= 1.0
