"""Shared test fixtures (where the real datasets are), and the suite's own accounting: at the
end of a run, the tests that used the most CPU time, their own and their subprocesses' (every
``mpirun`` rank a test starts counts for it), beside pytest's ``--durations`` (wall time);
``--cpu-profile FILE`` writes every test's CPU and wall seconds, and each file's, as JSON. The
files run longest first, by the committed profile ``benchmarks/results/test_suite_cpu.json``
(``make test`` keeps pytest-xdist from reordering them)."""

from __future__ import annotations

import json
import resource
from collections import defaultdict
from pathlib import Path

import pytest

from cpu_accounting import cpu_profile, longest_files_first
from mpi_launch import DATASETS_ROOT, REPO_ROOT

SUITE_PROFILE = REPO_ROOT / "benchmarks" / "results" / "test_suite_cpu.json"

CPU_REPORT_LINES = 10
_cpu_seconds: dict[str, float] = {}
_wall_seconds: dict[str, float] = defaultdict(float)


def pytest_addoption(parser):
    parser.addoption("--cpu-profile", metavar="FILE", default=None,
                     help="write each test's and each file's CPU seconds (its own and its "
                          "subprocesses') and wall seconds to FILE as JSON")


def pytest_collection_modifyitems(session, config, items):
    profile = json.loads(SUITE_PROFILE.read_text()) if SUITE_PROFILE.is_file() else None
    items[:] = [items[i] for i in longest_files_first([item.nodeid for item in items], profile)]


@pytest.fixture(scope="session")
def datasets_root() -> Path:
    """The repository's ``datasets/`` folder (real Cora, CiteSeer, Tolokers, Minesweeper, SNAP)."""
    return DATASETS_ROOT


def _cpu_now() -> float:
    """CPU seconds (user + system) of this process and of its finished subprocesses."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.cpu_at_start = _cpu_now()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "teardown":  # setup, call and teardown; the report carries it to the
        # process that prints the summary (pytest-xdist's controller, or this one)
        outcome.get_result().user_properties.append(
            ("cpu_s", _cpu_now() - getattr(item, "cpu_at_start", _cpu_now())))


def pytest_runtest_logreport(report):
    _wall_seconds[report.nodeid] += report.duration  # setup, call and teardown
    for name, value in report.user_properties:
        if name == "cpu_s":
            _cpu_seconds[report.nodeid] = value


def pytest_sessionfinish(session):
    path = session.config.getoption("--cpu-profile")
    if path and _cpu_seconds and not hasattr(session.config, "workerinput"):  # the controller
        Path(path).write_text(json.dumps(cpu_profile(_cpu_seconds, _wall_seconds), indent=1))


def pytest_terminal_summary(terminalreporter):
    if not _cpu_seconds:
        return
    total = sum(_cpu_seconds.values())
    terminalreporter.write_sep("=", f"most CPU time ({total:.0f} s in all, this process and "
                                    "its subprocesses)")
    for nodeid, seconds in sorted(_cpu_seconds.items(), key=lambda kv: -kv[1])[
            :CPU_REPORT_LINES]:
        terminalreporter.write_line(f"{seconds:8.1f}s cpu  {nodeid}")
