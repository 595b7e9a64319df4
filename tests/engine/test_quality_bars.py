"""Quality bars on 2 ranks, in one launch (mean of 3 seeds, GCN CiteSeer 5; the test metric at
the epoch with the best validation metric, the model selection of the GCN and GAT papers): GCN
CiteSeer test accuracy >= 0.67, GAT Cora >= 0.80, GraphSAGE Tolokers ROC AUC >= 0.70; and GCN
Cora >= 0.79 at the *final* epoch (Kipf & Welling's setting, published 0.815). Two ranks, one
per core of the test machine: the same bars on 4 oversubscribed ranks cost 1.7x the CPU time
for scores within 0.006 of these.

One process is not trained to these bars as well: the exactness tests hold 1, 2, 3 and 4 ranks
equal to PyG's layers on the whole graph (tests/engine/test_exactness.py,
tests/nn/test_nn_exactness.py, GAT among them), and GCN Cora >= 0.79 at the final epoch is
tested through the CLI in one process (test_cora_accuracy.py)."""

import json
from pathlib import Path

import pytest

from mpi_launch import run_python_mpi

DRIVER = Path(__file__).with_name("quality_driver.py")
BARS = {"gcn-cora-final": 0.79, "gcn-citeseer": 0.67, "gat-cora": 0.80, "sage-tolokers": 0.70}


@pytest.mark.timeout(1500)
def test_quality_bars_on_2_ranks(datasets_root, tmp_path):
    out = tmp_path / "quality.json"
    result = run_python_mpi(2, DRIVER, [str(datasets_root), str(out)], timeout=1400)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(out.read_text())
    below = {name: results[name] for name, bar in BARS.items() if results[name]["mean"] < bar}
    assert not below, below
