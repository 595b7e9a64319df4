"""What ``plan`` and ``tune`` assume, said and checked: the rank count of a partition store,
memory per host for a number of ranks per host, and values that start with a dash."""

import pytest

from gnnscale.cli.plan_cmd import format_hosts, host_peaks
from test_cli_outputs import run_in_process

pytestmark = pytest.mark.timeout(300)

SBM = ["--dataset", "sbm", "--num-nodes", "2000"]


def one_line(code, err, *fragments):
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err)
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.fixture
def store(tmp_path, capsys):
    out = tmp_path / "parts"
    code, _, err = run_in_process(["partition", *SBM, "--method", "random", "--parts", "4",
                                   "--out", str(out)], capsys)
    assert code == 0, err
    return out


def test_plan_takes_the_rank_count_from_the_store(store, capsys):
    code, out, err = run_in_process(["plan", "--partitions", str(store)], capsys)
    assert code == 0, err
    assert f"training from store {store} on 4 rank(s)" in out
    assert "all 4 rank(s) on one host" in out
    code, out, err = run_in_process(["plan", "--partitions", str(store), "--parts", "4"],
                                    capsys)
    assert code == 0, err


def test_plan_refuses_parts_that_contradict_the_store(store, capsys):
    code, out, err = run_in_process(["plan", "--partitions", str(store), "--parts", "3"],
                                    capsys)
    one_line(code, err, "--parts 3", f"--partitions {store}", "holds 4 parts")
    assert "peak" not in out


def test_host_peaks_sum_each_hosts_ranks_in_order():
    assert host_peaks([1, 2, 3, 4, 5], 2) == [3.0, 7.0, 5.0]
    assert host_peaks([1, 2, 3], None) == [6.0]
    assert host_peaks([4, 1], 8) == [5.0]


def test_the_largest_host_and_its_ranks():
    gib = 2**30
    plan = {"per_rank_peak": [1 * gib, 1 * gib, 2 * gib, 3 * gib, 1 * gib],
            "per_rank_peak_retained": [2 * gib] * 5, "phases": {"train": [0] * 5}}
    assert format_hosts(plan, 2) == ("per host (3 host(s) of 2 rank(s)): largest host 1 "
                                     "(ranks 2-3) needs 5.00 GiB, 4.00 GiB with freed memory "
                                     "kept for reuse")
    plan["phases"] = {"store": [0] * 5}  # no training: no retained figure
    assert format_hosts(plan, None) == ("per host (all 5 rank(s) on one host): largest host 0 "
                                        "(ranks 0-4) needs 8.00 GiB")
    assert "largest host 3 (rank 3)" in format_hosts(plan, 1)


def test_plan_prints_memory_per_host(capsys):
    code, out, err = run_in_process(["plan", *SBM, "--parts", "4", "--ranks-per-host", "2"],
                                    capsys)
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("per host"))
    assert line.startswith("per host (2 host(s) of 2 rank(s)): largest host "), line


@pytest.mark.parametrize("argv,option,value", [
    (["tune", *SBM, "--network", "-5,10"], "--network", "-5,10"),
    (["tune", *SBM, "--network", "-.5,10"], "--network", "-.5,10"),
    (["train", *SBM, "--simulate-network", "-5,10"], "--simulate-network", "-5,10"),
])
def test_a_value_starting_with_a_dash_gets_the_options_own_error(argv, option, value, capsys):
    code, _, err = run_in_process(argv, capsys)
    one_line(code, err, f"argument {option}", "LATENCY_US,GBIT_PER_S", repr(value))
    assert "expected one argument" not in err


def test_an_option_after_an_option_is_still_an_option(capsys):
    code, _, err = run_in_process(["tune", *SBM, "--network", "--no-plot"], capsys)
    one_line(code, err, "--network", "expected one argument")
