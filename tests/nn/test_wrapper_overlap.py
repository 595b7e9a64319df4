"""A wrapped PyG layer posts its halo exchange, runs on the interior nodes while it travels, and
runs on the boundary nodes once it has arrived; in backward the halo gradients are posted before
the interior call's backward runs. Outputs and input gradients equal the layer on the whole
graph.

Two ranks as threads in this process (``tests/reliability/rel_thread_comm.py``); the order is
read from what the ranks record, not from timings.
"""

import copy
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnscale.engine import LocalProblem
from gnnscale.nn import DistributedConv
from gnnscale.nn.pyg_wrapper import DestinationSplit

split_of = DestinationSplit.of

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))
from nn_cases import directed_graph  # noqa: E402
from rel_thread_comm import run_ranks  # noqa: E402

pyg_nn = pytest.importorskip("torch_geometric.nn")


def _layers():
    torch.manual_seed(0)
    return {"GATConv, bipartite with self-loops": pyg_nn.GATConv(24, 8, heads=2),
            "ClusterGCNConv, one feature matrix": pyg_nn.ClusterGCNConv(24, 16)}


@pytest.mark.parametrize("name", sorted(_layers()))
def test_interior_runs_while_the_halo_travels_and_results_equal_the_whole_graph(name):
    torch.set_num_threads(1)
    data = directed_graph()
    parts = (np.arange(data.num_nodes) * 7 // data.num_nodes) % 2  # 2 ranks, some cut edges
    conv = _layers()[name]
    x = torch.from_numpy(data.x)
    src, dst = data.edge_index()
    edge_index = torch.from_numpy(np.stack([src, dst]))
    x_ref = x.clone().requires_grad_()
    reference = conv(x_ref, edge_index)
    weights = torch.randn(reference.shape, generator=torch.Generator().manual_seed(1))
    (reference * weights).sum().backward()

    def job(comm):
        problem = LocalProblem.from_graph_data(data, parts, comm)
        graph, plan = problem.graph, problem.graph.halo_plan
        owned = torch.from_numpy(graph.owned_nodes)
        events = []
        wait, post_backward = plan.wait, plan.post_backward
        plan.wait = lambda work: (events.append("wait"), wait(work))[1]
        plan.post_backward = lambda rows: (events.append("post halo gradients"),
                                           post_backward(rows))[1]
        layer = DistributedConv(copy.deepcopy(conv))  # the ranks' hooks apart

        def record_call(module, args, output):
            inputs = args[0]
            sources, rows = (inputs[0], inputs[1]) if isinstance(inputs, tuple) else (inputs,) * 2
            events.append(("forward", rows.size(0)))
            # backward of this call: starts at its output, ends at its source rows' gradient
            output.register_hook(lambda grad: events.append("backward starts"))
            sources.register_hook(lambda grad: events.append("backward ends"))

        layer.conv.register_forward_hook(record_call)
        x_owned = x[owned].clone().requires_grad_()
        out = layer(x_owned, graph)
        (out * weights[owned]).sum().backward()
        if layer.bipartite:  # destinations of the interior, then the boundary call
            expected = [split_of(graph).num_interior, split_of(graph).num_boundary]
        else:  # owned rows, then owned and halo rows
            expected = [graph.num_owned, graph.num_owned + graph.num_halo]
        return owned, out.detach(), x_owned.grad, events, split_of(graph), expected

    results = run_ranks(2, job)
    for owned, out, grad, events, split, expected in results:
        assert split.num_interior > 0 and split.num_boundary > 0
        forwards = [e for e in events if isinstance(e, tuple)]
        assert forwards == [("forward", rows) for rows in expected]
        # forward: interior call, halo arrives, boundary call
        assert events[:3] == [forwards[0], "wait", forwards[1]]
        # backward: the boundary call's, the halo gradients posted, the interior call's while
        # they travel, then the wait for the gradients coming back from the peer
        assert events[3:] == ["backward starts", "backward ends", "post halo gradients",
                              "backward starts", "backward ends", "wait"]
        torch.testing.assert_close(out, reference.detach()[owned], rtol=1e-5, atol=1e-6)
    grads = torch.zeros_like(x)
    for owned, _, grad, *_ in results:
        grads[owned] = grad
    torch.testing.assert_close(grads, x_ref.grad, rtol=1e-5, atol=1e-6)
