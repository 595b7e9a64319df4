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
