"""``gnnscale partition --dataset PATH`` on the OGB binary and PyG npz layouts, good and bad."""

import numpy as np
import pytest

from gnnscale.data import generate_sbm

from data_ogb_layout import write_ogb_binary
from mpi_launch import gnnscale_cli

pytestmark = pytest.mark.timeout(300)


def test_partition_reads_both_layouts_and_refuses_bad_files_in_one_line(tmp_path):
    graph = generate_sbm(num_nodes=60, num_classes=3, num_val=10, num_test=10, seed=1)
    folder = write_ogb_binary(tmp_path / "papers_small", graph)
    result = gnnscale_cli(None, ["partition", "--dataset", str(folder), "--parts", "2",
                                 "--method", "random", "--out", str(tmp_path / "store")])
    assert result.returncode == 0, result.stderr
    bad = tmp_path / "bad.npz"
    np.savez(bad, edge_index=np.array([[0, 1], [1, 60]]), x=graph.x, y=graph.y)
    result = gnnscale_cli(None, ["partition", "--dataset", str(bad), "--parts", "2",
                                 "--method", "random", "--out", str(tmp_path / "store2")])
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "node id 60" in lines[0] and str(bad) in lines[0], lines
    assert not (tmp_path / "store2").exists()
