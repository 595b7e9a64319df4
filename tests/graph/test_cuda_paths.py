"""The same layers run on a GPU without changes (skipped on machines without CUDA)."""

import numpy as np
import pytest
import torch

from gnnscale.comm import SingleCommunicator
from gnnscale.data import generate_sbm
from gnnscale.engine import LocalProblem, Trainer
from gnnscale.nn import GNN

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.mark.parametrize("dropout", [0.0, 0.5])
@pytest.mark.parametrize("model_name", ["gcn", "sage", "gat"])
def test_training_on_cuda_matches_cpu(model_name, dropout):
    data = generate_sbm(num_nodes=500, seed=3)
    comm = SingleCommunicator()
    losses = {}
    for device in ("cpu", "cuda"):
        problem = LocalProblem.from_graph_data(data, np.zeros(500, np.int64), comm, device=device)
        torch.manual_seed(0)
        model = GNN(model_name, data.num_features, 16, data.num_classes, dropout=dropout).to(device)
        trainer = Trainer(model, problem, comm)
        losses[device] = [trainer.train_step()[0] for _ in range(5)]
        assert trainer.evaluate()[1]["test_acc"] > 0
    np.testing.assert_allclose(losses["cuda"], losses["cpu"], rtol=1e-4)


@pytest.mark.parametrize("relu", [False, True])
def test_dropout_on_cuda_drops_what_the_cpu_drops(relu):
    from gnnscale.nn import dropout as d

    fn = d.relu_dropout if relu else d.dropout
    x = torch.randn(1000, 300)
    grad = torch.randn(1000, 300)
    outs, grads = {}, {}
    for device in ("cpu", "cuda"):
        leaf = x.detach().to(device).requires_grad_()
        d.manual_seed(21)
        out = fn(leaf, 0.5)
        out.backward(grad.to(device))
        outs[device], grads[device] = out.detach().cpu(), leaf.grad.cpu()
    assert torch.equal(outs["cuda"], outs["cpu"])
    assert torch.equal(grads["cuda"], grads["cpu"])
