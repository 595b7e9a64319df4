"""Stochastic block model generator: structure, determinism, splits and learnability."""

import numpy as np
import pytest
import torch
from python_lines import lines_run

from gnnscale.data import generate_sbm, load_dataset
from gnnscale.errors import UsageError


def edge_set(g):
    return set(map(tuple, g.edge_index().T.tolist()))


def test_symmetric_no_self_loops_no_duplicates_and_valid():
    g = generate_sbm(num_nodes=500, seed=3).validate()
    edges = edge_set(g)
    assert len(edges) == g.num_edges
    assert all((v, u) in edges for u, v in edges)
    assert all(u != v for u, v in edges)
    assert g.x.shape == (500, 32) and g.num_classes == 4
    assert 8 < g.num_edges / g.num_nodes <= 10


def test_same_seed_same_graph_other_seed_other_graph():
    a, b, c = generate_sbm(seed=1), generate_sbm(seed=1), generate_sbm(seed=2)
    for field in ("indptr", "indices", "x", "y", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.indices, c.indices)


@pytest.mark.parametrize("homophily", [0.0, 0.8, 1.0])
def test_homophily_is_the_fraction_of_same_class_edges(homophily):
    g = generate_sbm(num_nodes=3000, homophily=homophily, seed=0)
    src, dst = g.edge_index()
    same = float(np.mean(g.y[src] == g.y[dst]))
    assert abs(same - homophily) < 0.03


def test_isolated_fraction_gives_isolated_nodes():
    g = generate_sbm(num_nodes=1000, isolated_fraction=0.1, seed=0).validate()
    degree = np.diff(g.indptr)
    assert int((degree == 0).sum()) >= 100
    assert int((np.bincount(g.indices, minlength=g.num_nodes) == 0).sum()) >= 100


def test_split_sizes_disjoint_and_clipped_for_small_graphs():
    g = generate_sbm(num_nodes=2000, seed=0)
    assert (g.train_mask.sum(), g.val_mask.sum(), g.test_mask.sum()) == (80, 500, 1000)
    assert np.bincount(g.y[g.train_mask]).tolist() == [20, 20, 20, 20]
    small = generate_sbm(num_nodes=60, num_classes=3, seed=0).validate()
    counts = small.train_mask.sum() + small.val_mask.sum() + small.test_mask.sum()
    assert counts <= 60 and small.val_mask.sum() > 0 and small.test_mask.sum() > 0
    assert not (small.train_mask & small.val_mask).any()
    tiny = generate_sbm(num_nodes=4, num_classes=4, avg_degree=2, seed=0).validate()
    assert tiny.train_mask.sum() == 4


def test_large_graph_is_vectorised():
    """No Python work per node or edge: 100,000 nodes and a million edges run no more Python
    lines than 1,000 nodes (a loop over nodes or edges would add at least 99,000)."""
    g = generate_sbm(num_nodes=100_000, avg_degree=10, seed=0)
    assert g.num_nodes == 100_000 and g.num_edges > 900_000
    small = lines_run(generate_sbm, num_nodes=1_000, avg_degree=10, seed=0)
    large = lines_run(generate_sbm, num_nodes=100_000, avg_degree=10, seed=0)
    assert large <= small + 100, (small, large)


def test_bad_arguments_raise_usage_error():
    with pytest.raises(UsageError, match="homophily"):
        generate_sbm(homophily=1.5)
    with pytest.raises(UsageError, match="num_nodes"):
        generate_sbm(num_nodes=0)


def test_load_dataset_passes_options_to_the_generator():
    g = load_dataset("SBM", num_nodes=300, num_classes=3, seed=5)
    assert g.num_nodes == 300 and g.num_classes == 3


def _accuracy(g, use_graph: bool, seed: int = 0) -> float:
    from torch_geometric.nn import GCNConv

    torch.manual_seed(seed)
    data = g.to_pyg()
    if use_graph:
        layers = torch.nn.ModuleList([GCNConv(g.num_features, 16), GCNConv(16, g.num_classes)])
        def run():
            hidden = torch.relu(layers[0](data.x, data.edge_index))
            return layers[1](hidden, data.edge_index)
    else:
        layers = torch.nn.ModuleList([torch.nn.Linear(g.num_features, 16),
                                      torch.nn.Linear(16, g.num_classes)])
        def run():
            return layers[1](torch.relu(layers[0](data.x)))
    optimiser = torch.optim.Adam(layers.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(100):
        optimiser.zero_grad()
        loss = torch.nn.functional.cross_entropy(run()[data.train_mask], data.y[data.train_mask])
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        predicted = run().argmax(1)
    return float((predicted[data.test_mask] == data.y[data.test_mask]).float().mean())


def test_gcn_learns_it_well_above_chance_and_beats_features_alone():
    g = generate_sbm(seed=0)
    gcn, mlp = _accuracy(g, True), _accuracy(g, False)
    assert gcn > 0.75, gcn
    assert mlp < gcn - 0.2, (mlp, gcn)
