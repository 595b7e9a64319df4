"""Shared test fixtures (where the real datasets are), and the suite's own accounting: at the
end of a run, the tests that used the most CPU time, their own and their subprocesses' (every
``mpirun`` rank a test starts counts for it), beside pytest's ``--durations`` (wall time)."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from mpi_launch import DATASETS_ROOT

CPU_REPORT_LINES = 10
_cpu_seconds: dict[str, float] = {}


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
    for name, value in report.user_properties:
        if name == "cpu_s":
            _cpu_seconds[report.nodeid] = value


def pytest_terminal_summary(terminalreporter):
    if not _cpu_seconds:
        return
    total = sum(_cpu_seconds.values())
    terminalreporter.write_sep("=", f"most CPU time ({total:.0f} s in all, this process and "
                                    "its subprocesses)")
    for nodeid, seconds in sorted(_cpu_seconds.items(), key=lambda kv: -kv[1])[
            :CPU_REPORT_LINES]:
        terminalreporter.write_line(f"{seconds:8.1f}s cpu  {nodeid}")
