"""GCN on Cora reaches the published accuracy through the CLI in one process (on 2 ranks:
test_quality_bars.py, in the launch of the other bars).

Kipf & Welling's setting: 2 layers, 16 hidden, dropout 0.5, lr 0.01, weight decay 5e-4,
200 epochs; mean final test accuracy over 3 seeds must be at least 0.79 (published: 0.815).
"""

import json

import numpy as np
import pytest

from mpi_launch import gnnscale_cli

SEEDS = (0, 1, 2)


@pytest.mark.timeout(900)
def test_gcn_cora_accuracy(datasets_root, tmp_path):
    accuracies = []
    for seed in SEEDS:
        out = tmp_path / f"seed{seed}.jsonl"
        result = gnnscale_cli(None, ["train", "--dataset", "cora", "--data-root",
                                     str(datasets_root), "--model", "gcn", "--layers", "2",
                                     "--hidden", "16", "--dropout", "0.5", "--lr", "0.01",
                                     "--weight-decay", "5e-4", "--epochs", "200",
                                     "--seed", str(seed), "--metrics-out", str(out),
                                     # the final epoch's evaluation is the one read; the
                                     # training is the same for any --eval-every
                                     "--eval-every", "200", "--no-progress"], timeout=400)
        assert result.returncode == 0, result.stderr[-2000:]
        summary = json.loads(out.read_text().splitlines()[-1])
        accuracies.append(summary["final_test_acc"])
    assert np.mean(accuracies) >= 0.79, accuracies
