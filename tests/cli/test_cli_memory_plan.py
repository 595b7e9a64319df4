"""`gnnscale plan`, and `train`/`partition` stopping before work the memory plan says won't fit."""

import json
import re

import pytest

pytest.importorskip("torch")
from gnnscale.cli.main import main  # noqa: E402
from gnnscale.cli.memory_check import AVAILABLE_ENV  # noqa: E402
from mpi_launch import gnnscale_cli  # noqa: E402

# large enough that its plan exceeds what the runtime already holds
SBM = ["--dataset", "sbm", "--num-nodes", "20000", "--data-root", "."]


def test_plan_prints_every_phase_and_the_peak(capsys):
    assert main(["plan", *SBM, "--parts", "4", "--model", "gat", "--exact"]) == 0
    out = capsys.readouterr().out
    for phase in ("load", "partition", "setup", "train", "eval"):
        assert f"\n{phase} " in out
    assert "peak: rank" in out and "exact parts" in out
    assert main(["plan", *SBM, "--parts", "2", "--mode", "partition"]) == 0
    assert "\nstore " in capsys.readouterr().out


def test_plan_from_a_store_manifest(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["partition", *SBM, "--parts", "2", "--out", str(store)]) == 0
    capsys.readouterr()
    assert main(["plan", "--partitions", str(store), "--parts", "2"]) == 0
    out = capsys.readouterr().out
    assert "training from store" in out and "\nload " not in out and "peak: rank" in out


# Fresh processes: the check compares the plan with what the process does not hold yet.
TINY = {AVAILABLE_ENV: "1000000"}


def test_train_stops_before_work_that_cannot_fit(tmp_path):
    metrics = tmp_path / "m.jsonl"
    done = gnnscale_cli(None, ["train", *SBM, "--epochs", "1", "--no-progress",
                               "--metrics-out", str(metrics)], env=TINY)
    assert done.returncode == 2
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1
    assert "would not fit in memory" in err and re.search(r"in phase '(load|train)'", err)
    assert "but 1 MiB is available" in err
    assert not metrics.exists()
    done = gnnscale_cli(None, ["train", *SBM, "--epochs", "1", "--no-progress",
                               "--ignore-memory-plan"], env=TINY)
    assert done.returncode == 0, done.stderr


def test_partition_stops_and_writes_nothing(tmp_path):
    done = gnnscale_cli(None, ["partition", *SBM, "--parts", "2", "--out",
                               str(tmp_path / "s")], env=TINY)
    assert done.returncode == 2
    assert "partitioning into 2 parts would not fit in memory" in done.stderr
    assert not (tmp_path / "s").exists()


def test_ranks_on_one_host_share_its_memory(tmp_path):
    metrics = tmp_path / "m.jsonl"
    done = gnnscale_cli(2, ["train", *SBM, "--epochs", "1", "--no-progress", "--metrics-out",
                            str(metrics)], env=TINY)
    assert done.returncode == 2
    assert "the 2 rank(s) on" in done.stderr and done.stderr.count("would not fit") == 1
    fine = gnnscale_cli(2, ["train", *SBM, "--epochs", "1", "--no-progress", "--metrics-out",
                            str(metrics)])
    assert fine.returncode == 0, fine.stderr
    assert json.loads(metrics.read_text().splitlines()[-1])["ranks"] == 2


class TwoRanks:
    """A communicator stand-in: this rank and a peer on ``peer_host`` with the same need."""

    rank, size = 0, 2

    def __init__(self, peer_host):
        self.peer_host = peer_host

    def allgather_object(self, mine):
        host = mine[0] if self.peer_host is None else self.peer_host
        return [mine, (host, *mine[1:-1], 1)]


def test_the_check_sums_the_ranks_of_one_host(monkeypatch):
    import numpy as np

    from gnnscale.cli.memory_check import check_plan, current_rss_bytes
    from gnnscale.errors import UsageError

    peak = current_rss_bytes() + 100 * 2**20  # each rank needs 100 MiB more
    plan = {"per_rank_peak": np.array([peak, peak]),
            "phases": {"load": np.array([peak - 1, peak - 1]), "train": np.array([peak, peak])}}
    monkeypatch.setenv(AVAILABLE_ENV, str(150 * 2**20))
    check_plan(plan, TwoRanks(peer_host="elsewhere"), "training")  # one rank per host: fits
    with pytest.raises(UsageError, match=r"the 2 rank\(s\) on .* need 2\d\d MiB more but "
                                         r"150 MiB is available"):
        check_plan(plan, TwoRanks(peer_host=None), "training")
    check_plan(plan, TwoRanks(peer_host=None), "training", ignore=True)


def test_growth_after_loading_counts_when_the_runtime_outgrows_the_plan(monkeypatch):
    """The plan's runtime estimate can be below this process's resident memory; what the plan
    adds after its ``load`` phase is still needed."""
    import numpy as np

    from gnnscale.cli import memory_check
    from gnnscale.errors import UsageError

    plan = {"per_rank_peak": np.array([300e6]),
            "phases": {"load": np.array([200e6]), "partition": np.array([300e6])}}
    monkeypatch.setattr(memory_check, "current_rss_bytes", lambda: int(2e9))
    monkeypatch.setenv(AVAILABLE_ENV, str(int(50e6)))
    with pytest.raises(UsageError, match="need 95 MiB more but 48 MiB is available"):
        memory_check.check_plan(plan, None, "partitioning")
    monkeypatch.setenv(AVAILABLE_ENV, str(int(150e6)))
    memory_check.check_plan(plan, None, "partitioning")


def test_the_check_says_whether_the_retained_heap_fits_too(monkeypatch):
    import numpy as np

    from gnnscale.cli.memory_check import check_plan, current_rss_bytes

    held = current_rss_bytes()
    plan = {"per_rank_peak": np.array([held + 100 * 2**20]),
            "per_rank_peak_retained": np.array([held + 150 * 2**20]),
            "per_rank_peak_retained_bound": np.array([held + 300 * 2**20]),
            "phases": {"train": np.array([held + 100 * 2**20])}}
    monkeypatch.setenv(AVAILABLE_ENV, str(200 * 2**20))
    # fits, but only lean: the decision takes the largest growth measured, not the expected
    assert check_plan(plan, None, "training") is False
    monkeypatch.setenv(AVAILABLE_ENV, str(400 * 2**20))
    assert check_plan(plan, None, "training") is True


def test_train_keeps_the_allocator_defaults_when_only_the_lean_run_fits(monkeypatch, capsys):
    from gnnscale.cli import build
    from gnnscale.engine import memory

    class One:
        rank, size = 0, 1

    monkeypatch.delenv("GNNSCALE_RETAIN_MEMORY", raising=False)
    monkeypatch.setitem(memory._state, "applied", None)
    build.choose_allocator(True, One())
    assert memory._state["applied"] is None  # the trainer decides (retains)
    build.choose_allocator(False, One())
    assert memory.retain_freed_memory() is False and not memory.retaining()
    assert "allocator keeps its defaults" in capsys.readouterr().out
    monkeypatch.setitem(memory._state, "applied", None)
    monkeypatch.setenv("GNNSCALE_RETAIN_MEMORY", "1")  # an explicit choice wins
    build.choose_allocator(False, One())
    assert memory._state["applied"] is None


def test_keeping_the_defaults_undoes_retention(monkeypatch):
    from gnnscale.engine import memory

    monkeypatch.delenv("GNNSCALE_RETAIN_MEMORY", raising=False)
    monkeypatch.setitem(memory._state, "applied", None)
    try:
        assert memory.retain_freed_memory() is True and memory.retaining()
        memory.keep_allocator_defaults()
        assert not memory.retaining() and memory.retain_freed_memory() is False
    finally:
        memory._state["applied"] = None
