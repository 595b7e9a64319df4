"""What the CLI's helpers take: plain values, not the parsed options (memory plan checks, the
shared graph), and where the shared option helpers live."""

import numpy as np

from gnnscale.cli import arguments, build, partition_cmd
from gnnscale.cli.memory_check import check_training, model_options, plan_for_store
from gnnscale.cli.shared_graph import load_shared_graph
from gnnscale.comm.single import SingleCommunicator
from gnnscale.data import generate_sbm
from test_cli_outputs import run_in_process


def test_the_shared_graph_takes_a_loader_not_the_options(tmp_path):
    data = generate_sbm(num_nodes=200, seed=1)
    calls = []

    def load():
        calls.append(1)
        return data
    assert load_shared_graph(SingleCommunicator(), "sbm", tmp_path, load) is data
    assert calls == [1]


def test_the_memory_checks_take_plain_values(tmp_path, capsys):
    model = {"model": "gat", "layers": 2, "hidden": 16, "heads": 4}
    data = generate_sbm(num_nodes=300, seed=2)
    assert check_training(SingleCommunicator(), data, layout="generated", model=model,
                          method="metis") in (True, False)
    store = tmp_path / "store"
    code, _, err = run_in_process(["partition", "--dataset", "sbm", "--num-nodes", "300",
                                   "--parts", "2", "--method", "random", "--out", str(store)],
                                  capsys)
    assert code == 0, err
    plan = plan_for_store(store, 2, model)
    assert len(plan["per_rank_peak"]) == 2 and np.all(np.asarray(plan["per_rank_peak"]) > 0)

    class Parsed:  # what argparse gives: only the model options are read
        model, layers, hidden, heads, out_heads, dropout, lr = "gcn", 3, 8, 2, 1, 0.1, 0.5
    assert model_options(Parsed) == {"model": "gcn", "layers": 3, "hidden": 8, "heads": 2,
                                     "out_heads": 1, "dropout": 0.1}


def test_balance_options_are_shared_from_arguments():
    assert partition_cmd.balance_params is arguments.balance_params
    assert build.balance_params is arguments.balance_params
    assert arguments.balance_params("nodes,edges", "metis", "--method") == \
        {"balance": ("nodes", "edges")}
