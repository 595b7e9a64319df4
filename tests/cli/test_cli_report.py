"""The per-rank tables of ``gnnscale train``: columns sized to their content."""

import re

from gnnscale.cli.report import format_profile_table, format_time_table
from gnnscale.engine.metrics import TIME_PARTS


def _final(per_rank):
    return {"epochs": 3, "final_loss": 1.0, "final_train_acc": 0.5, "final_val_acc": 0.5,
            "final_test_acc": 0.5, "best_epoch": 2, "best_val_acc": 0.5,
            "test_acc_at_best_val": 0.5, "mean_epoch_time_s": 0.01, "total_time_s": 0.03,
            "mean_time_breakdown_s": {}, "per_rank": per_rank}


def _rank(rank, owned, halo, seconds=0.001):
    return {"rank": rank, "owned": owned, "halo": halo, **{key: seconds for key in TIME_PARTS}}


def _cells(text, label):
    line = next(line for line in text.splitlines() if line.startswith(label))
    return line[len(label):].split()


def test_wide_counts_stay_apart_and_line_up_under_their_rank():
    # 4 ranks of SNAP ego-Twitter: owned and halo counts that fill a 10-character column
    ranks = [_rank(0, 20262, 11411197), _rank(1, 33869, 8269104), _rank(2, 20262, 9),
             _rank(3, 7, 123456789012)]
    text = format_time_table(_final(ranks))
    assert _cells(text, "owned / halo nodes") == ["20262/11411197", "33869/8269104", "20262/9",
                                                  "7/123456789012"]
    header = next(line for line in text.splitlines() if "rank 0" in line)
    counts = next(line for line in text.splitlines() if line.startswith("owned / halo nodes"))
    for r in range(4):  # every cell ends where its rank's header ends (right-aligned column)
        end = header.index(f"rank {r}") + len(f"rank {r}")
        cell = _cells(text, "owned / halo nodes")[r]
        assert counts[end - len(cell):end] == cell
    assert re.search(r"\d  +\d", counts)  # at least two spaces between neighbours


def test_wide_times_in_the_profile_table_stay_apart():
    per_rank = [{"rank": r, "compute_s": 123456.789, "peak_rss_mb": 1.5} for r in range(3)]
    text = format_profile_table(per_rank)
    assert _cells(text, "compute (ms)") == ["123456789.00"] * 3
    assert _cells(text, "peak memory (MiB)") == ["1.50"] * 3


def test_narrow_numbers_keep_ten_character_columns():
    text = format_time_table(_final([_rank(0, 10, 5), _rank(1, 12, 3)]))
    line = next(line for line in text.splitlines() if line.startswith("owned / halo nodes"))
    assert line == f"{'owned / halo nodes':24s}{'10/5':>10s}{'12/3':>10s}"


def test_the_run_summary_holds_every_ranks_figures():
    import socket

    import numpy as np

    from gnnscale.cli.report import run_summary
    from gnnscale.comm.single import SingleCommunicator
    from gnnscale.data import generate_sbm
    from gnnscale.engine import LocalProblem, Trainer
    from gnnscale.nn import GNN

    data = generate_sbm(num_nodes=200, seed=3)
    comm = SingleCommunicator()
    problem = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64), comm)
    trainer = Trainer(GNN("gcn", problem.num_features, 8, problem.num_classes), problem, comm)
    records = trainer.fit(3)
    final = run_summary(trainer, records, "acc")
    assert final["epochs"] == 3 and final["ranks"] == 1 and final["hosts"] == 1
    assert final["monitor"] == "val_acc" and final["dense_products"] in ("onednn", "torch")
    [mine] = final["per_rank"]
    assert mine["rank"] == 0 and mine["host"] == socket.gethostname()
    assert mine["owned"] == 200 and mine["halo"] == 0
    assert {"halo_bytes_per_epoch", "peak_rss_mb", *TIME_PARTS} <= set(mine)
    assert "owned / halo nodes" in format_time_table(final)
