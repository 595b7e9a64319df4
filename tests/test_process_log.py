"""The suite's process accounting: ``tools/process_log`` logs every Python process as it exits,
``benchmarks/test_suite_processes.py`` sums the log up per test file."""

import importlib.util
import os
import subprocess
import sys

from mpi_launch import REPO_ROOT


def summariser():
    spec = importlib.util.spec_from_file_location(
        "test_suite_processes", REPO_ROOT / "benchmarks" / "test_suite_processes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start(code: str, log, test: str | None) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools" / "process_log"),
           "PROCESS_LOG": str(log)}
    env.pop("PYTEST_CURRENT_TEST", None)
    if test is not None:
        env["PYTEST_CURRENT_TEST"] = test
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)


def test_every_process_is_logged_with_its_test_and_summed_per_file(tmp_path):
    log = tmp_path / "processes.tsv"
    start("import torch", log, "tests/a/test_one.py::test_x (call)")
    start("sum(range(10**6))", log, "tests/a/test_one.py::test_y (call)")
    start("pass", log, "tests/test_two.py::test_z (call)")
    start("pass", log, None)  # outside any test: left out of the table
    start("import os; os._exit(0)", log, "tests/test_two.py::test_z (call)")  # writes nothing
    processes = summariser().read_log(log)
    assert [p["test_file"] for p in processes] == ["tests/a/test_one.py", "tests/a/test_one.py",
                                                  "tests/test_two.py", ""]
    assert [p["torch"] for p in processes] == [True, False, False, False]
    assert all(p["cpu_s"] >= 0 and p["wall_s"] >= 0 for p in processes)
    table = summariser().table(processes, top=1)
    rows = table.splitlines()
    assert rows[2].startswith("| `tests/a/test_one.py` | 2 | 1 | ")
    assert rows[3].startswith("| 1 other files | 1 | 0 | ")
    assert rows[4].startswith("| **every test** | 3 | 1 | ")
    assert "median of 1" in table


def test_a_malformed_log_or_no_log_is_one_line_and_exit_2(tmp_path):
    log = tmp_path / "processes.tsv"
    log.write_text("1\t0.5\n")
    script = REPO_ROOT / "benchmarks" / "test_suite_processes.py"
    for path, message in ((log, "processes.tsv:1: expected 6 tab-separated fields, got 2"),
                          (tmp_path / "missing.tsv", "no such log")):
        done = subprocess.run([sys.executable, str(script), str(path)], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 2 and message in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
