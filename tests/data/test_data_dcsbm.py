"""Degree-corrected stochastic block model: counts, degrees, communities, determinism, options."""

import numpy as np
import pytest
from python_lines import lines_run

from gnnscale.data import generate_dcsbm, load_dataset
from gnnscale.data.dcsbm import OGBN_PRODUCTS_EDGES, OGBN_PRODUCTS_NODES
from gnnscale.errors import UsageError
from mpi_launch import gnnscale_cli


def intra_fraction(g) -> float:
    """Fraction of the (directed) edges joining two nodes of one community (class)."""
    dst = np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))
    return float(np.mean(g.y[g.indices] == g.y[dst]))


def fitted_exponent(g) -> float:
    """Maximum-likelihood power-law exponent of the degrees at or above twice the mean
    (Clauset, Shalizi & Newman 2009, the discrete approximation)."""
    degree = np.diff(g.indptr)
    low = 2 * degree.mean()
    tail = degree[degree >= low]
    return float(1 + tail.size / np.log(tail / (low - 0.5)).sum())


def test_counts_and_classes_are_as_asked():
    g = generate_dcsbm(num_nodes=5000, num_classes=5, avg_degree=12, num_features=7, seed=0)
    assert g.num_nodes == 5000 and g.num_edges == 2 * 30_000
    assert g.num_classes == 5 and g.x.shape == (5000, 7) and g.x.dtype == np.float32
    assert np.bincount(g.y).tolist() == [1000] * 5
    parts = g.train_mask.sum(), g.val_mask.sum(), g.test_mask.sum()
    assert parts == (2500, 1250, 1250)
    assert not (g.train_mask & g.val_mask).any() and not (g.val_mask & g.test_mask).any()


def test_products_preset_keeps_the_published_figures_at_a_scale():
    g = generate_dcsbm(preset="ogbn-products", scale=0.002, seed=0)
    nodes = round(OGBN_PRODUCTS_NODES * 0.002)
    assert g.num_nodes == nodes == 4898
    # the same average degree: 2 * 61,859,140 / 2,449,029 = 50.52
    assert g.num_edges == 2 * round(nodes * OGBN_PRODUCTS_EDGES / OGBN_PRODUCTS_NODES)
    assert g.num_classes == 47 and g.x.shape == (nodes, 100)
    assert abs(g.num_edges / nodes - 50.52) < 0.01
    # OGB's sales-rank split proportions: 8% / 2% / 90%
    assert abs(g.train_mask.mean() - 0.0803) < 1e-3 and abs(g.val_mask.mean() - 0.0161) < 1e-3
    assert abs(g.test_mask.mean() - 0.9037) < 1e-3
    assert g.name == "dcsbm-ogbn-products-0.002"
    # options given explicitly win over the preset's
    other = generate_dcsbm(preset="ogbn-products", scale=0.002, mixing=0.3, num_features=4)
    assert other.x.shape == (nodes, 4) and intra_fraction(other) < intra_fraction(g) - 0.1


def test_symmetric_without_self_loops_or_duplicates():
    g = generate_dcsbm(num_nodes=2000, avg_degree=16, seed=4).validate()
    dst = np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))
    edges = set(zip(g.indices.tolist(), dst.tolist()))
    assert len(edges) == g.num_edges  # no duplicates
    assert all((v, u) in edges for u, v in edges)
    assert all(u != v for u, v in edges)


def test_degrees_are_heavy_tailed_with_the_asked_exponent():
    """Expected degrees follow a power law of exponent 2.5 capped at sqrt(N * mean): the
    largest degree is many times the mean, and the fitted tail exponent is 2.5 +- 0.3 (the cap
    and the Poisson spread of realised degrees bend it slightly)."""
    g = generate_dcsbm(num_nodes=50_000, avg_degree=20, degree_exponent=2.5, seed=0)
    degree = np.diff(g.indptr)
    assert degree.max() > 25 * degree.mean()
    assert np.median(degree) < 0.8 * degree.mean()  # skewed: most nodes below the mean
    assert 2.2 <= fitted_exponent(g) <= 2.8, fitted_exponent(g)
    steeper = generate_dcsbm(num_nodes=50_000, avg_degree=20, degree_exponent=3.5, seed=0)
    assert fitted_exponent(steeper) > fitted_exponent(g) + 0.5
    assert np.diff(steeper.indptr).max() < degree.max()


@pytest.mark.parametrize("mixing", [0.0, 0.1, 0.3, 0.6])
def test_a_mixing_fraction_of_the_edges_leaves_the_community(mixing):
    """Same-community edges: 1 - mixing within 0.03 (repeated pairs, redrawn, are a little
    more often inside a community)."""
    g = generate_dcsbm(num_nodes=20_000, num_classes=10, avg_degree=20, mixing=mixing, seed=1)
    assert abs(intra_fraction(g) - (1 - mixing)) < 0.03, intra_fraction(g)


def test_same_seed_same_graph_other_seed_other_graph():
    a, b = generate_dcsbm(num_nodes=3000, seed=7), generate_dcsbm(num_nodes=3000, seed=7)
    for field in ("indptr", "indices", "x", "y", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    c = generate_dcsbm(num_nodes=3000, seed=8)
    assert not np.array_equal(a.indices, c.indices)
    other_split = generate_dcsbm(num_nodes=3000, seed=7, split=1)
    assert np.array_equal(other_split.indices, a.indices)
    assert not np.array_equal(other_split.train_mask, a.train_mask)


def test_large_graph_is_vectorised():
    """No Python work per node or edge: 100,000 nodes and a million edges run no more Python
    lines than 1,000 nodes (a loop over nodes or edges would add at least 99,000)."""
    small = lines_run(generate_dcsbm, num_nodes=1_000, avg_degree=20, seed=0)
    large = lines_run(generate_dcsbm, num_nodes=100_000, avg_degree=20, seed=0)
    assert large <= small + 100, (small, large)


@pytest.mark.parametrize("options, fragments", [
    ({"mixing": 1.5}, ["mixing", "1.5"]),
    ({"mixing": 0.2, "num_classes": 1}, ["mixing", "0.2"]),
    ({"degree_exponent": 2.0}, ["degree_exponent", "2.0"]),
    ({"num_nodes": 1}, ["num_nodes", "1"]),
    ({"num_classes": 0}, ["num_classes", "0"]),
    ({"avg_degree": -3}, ["avg_degree", "-3"]),
    ({"num_nodes": 100, "avg_degree": 60}, ["avg_degree", "60"]),
    ({"max_degree": 5}, ["max_degree", "5"]),
    ({"num_features": 0}, ["num_features", "0"]),
    ({"train_fraction": 0.9, "val_fraction": 0.2}, ["train_fraction", "0.9"]),
    ({"preset": "ogbn-nope"}, ["preset", "ogbn-nope"]),
    ({"preset": "ogbn-products", "scale": 1.5}, ["scale", "1.5"]),
    ({"preset": "ogbn-products", "scale": 0.1, "num_nodes": 500}, ["num_nodes", "500"]),
    ({"scale": 0.5}, ["scale", "0.5"]),
    ({"mixing": "lots"}, ["mixing", "'lots'"]),
    ({"avg_degree": True}, ["avg_degree", "True"]),
])
def test_bad_options_are_refused_in_one_line(options, fragments):
    with pytest.raises(UsageError) as caught:
        generate_dcsbm(**options)
    message = str(caught.value)
    assert "\n" not in message and all(f in message for f in fragments), message


def test_load_dataset_and_the_command_line_take_it(tmp_path):
    g = load_dataset("DCSBM", num_nodes=800, mixing=0.05, num_classes=4, split=2)
    assert g.num_nodes == 800 and g.num_classes == 4
    assert np.array_equal(g.train_mask, generate_dcsbm(num_nodes=800, mixing=0.05,
                                                       num_classes=4, split=2).train_mask)
    source = ["--dataset", "dcsbm", "--dataset-option", "preset=ogbn-products",
              "--dataset-option", "scale=0.001"]
    out = tmp_path / "products"
    result = gnnscale_cli(None, ["convert", *source, "--out", str(out)])
    assert result.returncode == 0, result.stderr
    info = gnnscale_cli(None, ["info", str(out)])
    assert info.returncode == 0, info.stderr
    assert "2,449 nodes, 123,716 edges, 100 features, 47 classes" in info.stdout, info.stdout
    bad = gnnscale_cli(None, ["partition", "--dataset", "dcsbm", "--dataset-option",
                              "mixing=2", "--method", "metis", "--parts", "2", "--out",
                              str(tmp_path / "store")])
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    lines = [line for line in bad.stderr.splitlines() if "mixing" in line]
    assert len(lines) == 1 and "2" in lines[0], bad.stderr
    assert not (tmp_path / "store").exists()
