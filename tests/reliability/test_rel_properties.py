"""Property tests over random graphs: isolated nodes, empty parts, disconnected graphs, self loops,
duplicate edges, more parts than components.

Each example is a whole "job" in this process: one thread per rank over
:class:`rel_thread_comm.ThreadCommunicator` (a real ``mpirun`` per example would cost seconds).
For every example: every node is owned by exactly one rank; the halo plans agree on both sides
(exchanging each owned row's global id through the real halo exchange delivers exactly the ids of
the receiving rank's halo nodes, and the backward exchange returns every halo gradient to its
owner); and three epochs of full-batch training give the losses and gradients of one process
on the whole graph (losses to 1e-5, the first step's summed gradients to 1e-4 relative).
"""

import copy

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnnscale.comm import SingleCommunicator
from gnnscale.data import GraphData
from gnnscale.engine import LocalProblem, Trainer
from gnnscale.nn import GNN
from rel_thread_comm import run_ranks

pytestmark = pytest.mark.timeout(300)
NUM_CLASSES = 3


@st.composite
def graphs(draw):
    """(GraphData, node_parts, num_parts, model name) with the awkward cases well represented."""
    num_nodes = draw(st.integers(1, 24))
    num_parts = draw(st.integers(1, 6))
    num_edges = draw(st.integers(0, 3 * num_nodes))
    ids = st.integers(0, num_nodes - 1)
    edges = draw(st.lists(st.tuples(ids, ids), min_size=num_edges, max_size=num_edges))
    # self loops and duplicates: repeat some edges and add some v->v
    loops = draw(st.lists(ids, max_size=3))
    repeats = draw(st.lists(st.sampled_from(edges), max_size=4)) if edges else []
    all_edges = np.array(edges + [(v, v) for v in loops] + repeats, dtype=np.int64).reshape(-1, 2)
    node_parts = np.array(draw(st.lists(st.integers(0, num_parts - 1), min_size=num_nodes,
                                        max_size=num_nodes)), dtype=np.int64)
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(num_nodes, 5)).astype(np.float32)
    y = rng.integers(0, NUM_CLASSES, num_nodes)
    split = rng.integers(0, 3, num_nodes)
    split[rng.integers(0, num_nodes)] = 0  # at least one training node
    data = GraphData.from_edge_index(all_edges.T, num_nodes, x, y, split == 0, split == 1,
                                     split == 2, name="hyp", num_classes=NUM_CLASSES,
                                     symmetrize=draw(st.booleans())).validate()
    model = draw(st.sampled_from(["gcn", "sage", "gin", "gat", "graphconv"]))
    return data, node_parts, num_parts, model


def train(data, node_parts, comm, model, epochs=3):
    problem = LocalProblem.from_graph_data(data, node_parts, comm)
    model = copy.deepcopy(model)  # built once outside: threads share torch's global RNG
    trainer = Trainer(model, problem, comm, lr=0.05, seed=0)
    first_grads, step = {}, trainer.optimizer.step

    def capture_then_step(*args, **kwargs):  # the first step's summed gradients
        if not first_grads:
            first_grads.update({name: p.grad.clone() for name, p in model.named_parameters()
                                if p.grad is not None})
        return step(*args, **kwargs)

    trainer.optimizer.step = capture_then_step
    losses = [trainer.run_epoch().loss for _ in range(epochs)]
    return losses, first_grads, problem


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_distributed_equals_one_process_on_random_graphs(case):
    check_case(*case)


def named_case(edges, node_parts, num_parts, model="gcn", num_nodes=None):
    node_parts = np.asarray(node_parts, dtype=np.int64)
    n = num_nodes or node_parts.size
    rng = np.random.default_rng(n)
    edge_index = np.asarray(edges, dtype=np.int64).reshape(-1, 2).T
    split = np.arange(n) % 3
    data = GraphData.from_edge_index(edge_index, n, rng.normal(size=(n, 5)).astype(np.float32),
                                     np.arange(n) % NUM_CLASSES, split == 0, split == 1,
                                     split == 2, name="named", num_classes=NUM_CLASSES)
    return data.validate(), node_parts, num_parts, model


NAMED = {  # the awkward shapes, pinned so they run every time whatever hypothesis draws
    "no edges at all": named_case([], [0, 1, 2, 0, 1, 2], 3),
    "empty middle part": named_case([(0, 1), (1, 2), (2, 3)], [0, 0, 2, 2], 3, "sage"),
    "wrapped layer, one part all boundary": named_case(
        [(0, 1), (1, 0), (2, 3), (3, 2), (0, 2)], [0, 1, 0, 1], 2, "graphconv"),
    "wrapped layer, a part that only sends": named_case(
        [(0, 1), (0, 2), (2, 0), (3, 1)], [0, 1, 0, 1], 2, "graphconv"),
    "more parts than nodes' components": named_case([(0, 1), (1, 0), (2, 3), (3, 2)],
                                                    [0, 1, 2, 3], 5, "gat"),
    "isolated nodes among a star": named_case([(0, 1), (0, 2), (0, 3)], [1, 0, 1, 0, 1, 0], 2,
                                              "gin"),
    "self loops and duplicates across parts": named_case(
        [(0, 0), (0, 1), (0, 1), (1, 1), (1, 2), (1, 2), (2, 0)], [0, 1, 1], 2),
    "one node per part, complete graph": named_case(
        [(i, j) for i in range(5) for j in range(5)], [0, 1, 2, 3, 4], 5, "gat"),
}


@pytest.mark.parametrize("name", sorted(NAMED))
def test_distributed_equals_one_process_on_awkward_graphs(name):
    check_case(*NAMED[name])


def check_case(data, node_parts, num_parts, model_name):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = GNN(model_name, data.num_features, 8, NUM_CLASSES, num_layers=2, dropout=0.0)

    ref_losses, ref_state, _ = train(data, np.zeros(data.num_nodes, np.int64),
                                     SingleCommunicator(), model)

    def job(comm):
        losses, state, problem = train(data, node_parts, comm, model)
        graph, plan = problem.graph, problem.graph.halo_plan
        owned = np.flatnonzero(node_parts == comm.rank)
        assert graph.num_owned == owned.size
        # halo ids through the real forward exchange
        ids = torch.from_numpy(owned).double().reshape(-1, 1).requires_grad_()
        from gnnscale.graph.halo import exchange_halo

        halo = exchange_halo(ids, plan)[owned.size:]  # [owned; halo] rows
        # backward: a gradient of 1 on every halo row comes back once per (halo row) to its owner
        halo.sum().backward()
        return losses, state, owned, halo.detach().reshape(-1).long().numpy(), \
            ids.grad.reshape(-1).numpy(), graph.num_halo

    results = run_ranks(num_parts, job)
    owned = np.concatenate([r[2] for r in results])
    assert np.array_equal(np.sort(owned), np.arange(data.num_nodes))  # owned exactly once
    halo_ids = [r[3] for r in results]
    for rank, (_, _, mine, halo, grad, num_halo) in enumerate(results):
        assert halo.size == num_halo
        assert np.all(node_parts[halo] != rank) and len(set(halo)) == halo.size
        # every halo node is a source of an in-edge of one of my nodes, and all such appear
        src, dst = data.edge_index()
        needed = set(src[(node_parts[dst] == rank) & (node_parts[src] != rank)].tolist())
        assert set(halo.tolist()) == needed
        # each owned node's gradient = how many peers hold it as a halo node
        copies = np.array([sum(int(node in set(h)) for h in halo_ids) for node in mine])
        assert np.array_equal(grad, copies)
    for losses, state, *_ in results:
        # the first loss comes from the same weights; the later ones at the suite's 5e-5, as
        # Adam's steps amplify roundoff (below): a GAT on 15 nodes in parts of 14 and 1 ends its
        # third epoch 1.7e-5 apart
        np.testing.assert_allclose(losses[:1], ref_losses[:1], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(losses, ref_losses, rtol=5e-5, atol=1e-6)
        # gradients, not weights after Adam: Adam divides by sqrt(v), so a gradient that is 0
        # on one process and 1e-11 (roundoff) on several (GAT's last att_dst, which softmax
        # ignores) moves that weight by a whole lr step one way and not the other
        assert state.keys() == ref_state.keys()
        for key, value in ref_state.items():
            torch.testing.assert_close(state[key], value, rtol=1e-4, atol=1e-6)
