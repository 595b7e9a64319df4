"""2-rank training smoke tests of gnnscale under mpirun, in the DGL environment (torch 2.2.1)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from gnnscale.data import generate_sbm, to_dgl
from gnnscale.nn import GNN
from mpi_launch import REPO_ROOT, gnnscale_cli, run_python_mpi

from dglenv_reference import dgl_train

DRIVER = Path(__file__).with_name("dglenv_train_driver.py")
# Ranks import gnnscale from this checkout even where it is not installed (the DGL env).
ENV = {"PYTHONPATH": str(REPO_ROOT)}


def test_cli_trains_on_two_ranks(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    result = gnnscale_cli(2, ["train", "--dataset", "sbm", "--num-nodes", "2000", "--epochs",
                              "20", "--hidden", "16", "--no-progress", "--metrics-out",
                              str(metrics)], timeout=120, env=ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    summary = lines[-1]
    assert summary.get("summary") and summary["epochs"] == 20
    epochs = [r for r in lines if not r.get("summary")]
    assert epochs[-1]["loss"] < epochs[0]["loss"]
    assert summary["final_train_acc"] > 0.5  # SBM with 4 classes: well above chance


def test_two_ranks_on_a_dgl_graph_equal_dgl_layers_on_the_whole_graph(tmp_path):
    import dgl

    data = generate_sbm(num_nodes=500, seed=5, isolated_fraction=0.05)
    graph_path, out = tmp_path / "graph.bin", tmp_path / "out.npz"
    dgl.save_graphs(str(graph_path), [to_dgl(data)])
    result = run_python_mpi(2, DRIVER, [str(graph_path), str(out)], timeout=120, env=ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    saved = np.load(out)
    assert saved["num_owned"].sum() == data.num_nodes and saved["num_owned"].min() > 0
    for model_name in ("gcn", "sage"):
        model = GNN(model_name, data.num_features, 16, data.num_classes, dropout=0.0)
        model.load_state_dict({k.split("/", 2)[2]: torch.from_numpy(saved[k])
                               for k in saved.files if k.startswith(f"{model_name}/init/")})
        ref_losses, ref_logits = dgl_train(model, to_dgl(data))
        np.testing.assert_allclose(saved[f"{model_name}/losses"], ref_losses, rtol=1e-5,
                                   err_msg=model_name)
        np.testing.assert_allclose(saved[f"{model_name}/logits"], ref_logits, rtol=1e-4,
                                   atol=1e-5, err_msg=model_name)

