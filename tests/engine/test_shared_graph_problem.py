"""Ranks that map one converted graph build the same parts as ranks holding the whole graph."""

import sys
from pathlib import Path

import numpy as np
import pytest

from gnnscale.data import load_dataset
from gnnscale.data.converted import open_converted, write_converted
from gnnscale.engine import LocalProblem
from gnnscale.engine.local_problem import exchange_halo_requests
from partitioning.local_view import PartViewBuilder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))
from rel_thread_comm import run_ranks  # noqa: E402


@pytest.fixture(scope="module")
def mapped(tmp_path_factory):
    data = load_dataset("rmat", scale=8, num_features=5, num_classes=3, seed=4)
    folder = tmp_path_factory.mktemp("graph") / "g"
    write_converted(data, folder)
    return data, open_converted(folder)


@pytest.mark.parametrize("num_parts", [1, 3, 5])
def test_views_from_exchanged_requests_equal_whole_graph_views(mapped, num_parts):
    data, graph = mapped
    node_parts = np.random.default_rng(num_parts).integers(0, num_parts, data.num_nodes)
    reference = PartViewBuilder(data, node_parts, num_parts)

    def work(comm):
        builder = PartViewBuilder.for_graph(graph, node_parts, comm.size)
        owned, sources = builder.rows(comm.rank)
        halo, owner = builder.halo(comm.rank, sources)
        view = builder.view(comm.rank, requests=exchange_halo_requests(halo, owner, comm),
                            rows=(owned, sources))
        return view.arrays()

    for part, arrays in enumerate(run_ranks(num_parts, work)):
        expected = reference.view(part).arrays()
        assert arrays.keys() == expected.keys()
        for name in expected:
            np.testing.assert_array_equal(arrays[name], expected[name], err_msg=name)


def test_problem_reads_only_its_rows(mapped):
    data, graph = mapped
    node_parts = np.arange(data.num_nodes) % 4

    def work(comm):
        problem = LocalProblem.from_graph_data(graph, node_parts, comm)
        return problem.x.numpy(), problem.y.numpy(), problem.global_counts

    for part, (x, y, counts) in enumerate(run_ranks(4, work)):
        owned = np.flatnonzero(node_parts == part)
        np.testing.assert_array_equal(x, data.x[owned])
        np.testing.assert_array_equal(y, data.y[owned])
        assert counts["train"] == int(data.train_mask.sum())
