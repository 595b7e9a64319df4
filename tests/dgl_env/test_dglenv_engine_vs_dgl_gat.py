"""benchmarks/engine_vs_dgl.py's GAT in the DGL environment: gnnscale's GAT, DGL's GATConv and
PyG's GATConv (edge_index and CSR inputs) start from the same weights and, without dropout,
train to the same losses; a run adds its model to an existing results file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCHMARK = REPO_ROOT / "benchmarks" / "engine_vs_dgl.py"
VARIANTS = ("gnnscale", "dgl", "pyg_edge_index", "pyg_csr")


@pytest.fixture(scope="module")
def gat_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("engine_vs_dgl") / "results.json"
    # an earlier run's model, which a gat run must keep
    out.write_text(json.dumps({"benchmark": "engine_vs_dgl", "workload": {"scale": 18},
                               "models": {"gcn": {"variants": {}, "ratios_median": {}}}}))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, str(BENCHMARK), "--models", "gat", "--scale", "10", "--warmup", "0",
         "--reps", "3", "--dropout", "0", "--threads", "1", "--memory-fraction", "1",
         "--variants", *VARIANTS, "--out", str(out)],
        capture_output=True, text=True, timeout=180, env=env, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(out.read_text())


def test_gat_variants_agree_without_dropout(gat_report):
    variants = gat_report["models"]["gat"]["variants"]
    assert set(variants) == set(VARIANTS), variants
    ours = variants["gnnscale"]["losses"]
    assert len(ours) == 3
    for name in VARIANTS[1:]:
        losses = variants[name]["losses"]
        assert losses[0] == pytest.approx(ours[0], rel=1e-5, abs=1e-5), name
        assert losses == pytest.approx(ours, rel=1e-4, abs=1e-4), name  # after Adam steps
    model = gat_report["models"]["gat"]["model"]
    assert (model["heads"], model["hidden_per_head"], model["out_heads"]) == (4, 16, 1)


def test_a_gat_run_keeps_the_other_models(gat_report):
    assert list(gat_report["models"]) == ["gcn", "gat"]
    assert gat_report["models"]["gcn"]["run"]["workload"] == {"scale": 18}
    assert "run" not in gat_report["models"]["gat"]
    assert gat_report["workload"]["scale"] == 10
