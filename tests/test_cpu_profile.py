"""The suite's own accounting: ``--cpu-profile FILE`` (tests/conftest.py)."""

import json
import subprocess
import sys
from pathlib import Path

from cpu_accounting import cpu_profile, longest_files_first


def test_profile_sums_per_file_and_sorts_by_cpu():
    cpu = {"a.py::x": 1.0, "b.py::y": 5.0, "a.py::z": 3.0}
    wall = {"a.py::x": 2.0, "b.py::y": 4.0, "a.py::z": 1.0}
    profile = cpu_profile(cpu, wall)
    assert profile["cpu_s"] == 9.0 and profile["wall_s"] == 7.0 and profile["tests"] == 3
    assert list(profile["files"]) == ["b.py", "a.py"]
    assert profile["files"]["a.py"] == {"cpu_s": 4.0, "wall_s": 3.0, "tests": 2}
    assert list(profile["tests_by_cpu"]) == ["b.py::y", "a.py::z", "a.py::x"]


def test_option_writes_the_file(tmp_path):
    (tmp_path / "test_two.py").write_text("def test_a():\n    pass\n\n\ndef test_b():\n"
                                          "    sum(range(10**6))\n")
    for helper in ("conftest.py", "cpu_accounting.py"):
        (tmp_path / helper).write_text((Path(__file__).parent / helper).read_text())
    (tmp_path / "mpi_launch.py").write_text("from pathlib import Path\nDATASETS_ROOT = None\n"
                                            "REPO_ROOT = Path(__file__).parent\n")
    out = tmp_path / "profile.json"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--cpu-profile", str(out), str(tmp_path)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    profile = json.loads(out.read_text())
    assert profile["tests"] == 2 and list(profile["files"]) == ["test_two.py"]
    assert set(profile["tests_by_cpu"]) == {"test_two.py::test_a", "test_two.py::test_b"}


def test_files_run_longest_first_by_the_profile(tmp_path):
    ids = ["a.py::x", "a.py::y", "b.py::z", "new.py::w", "c.py::v"]
    profile = {"files": {"a.py": {"wall_s": 2.0}, "b.py": {"wall_s": 9.0},
                         "c.py": {"wall_s": 5.0}}}
    assert [ids[i] for i in longest_files_first(ids, profile)] == [
        "b.py::z", "c.py::v", "a.py::x", "a.py::y", "new.py::w"]
    assert longest_files_first(ids, None) == list(range(5))

    # through pytest: the conftest reads benchmarks/results/test_suite_cpu.json
    for name in ("test_one.py", "test_two.py"):
        (tmp_path / name).write_text("def test_a():\n    pass\n")
    for helper in ("conftest.py", "cpu_accounting.py"):
        (tmp_path / helper).write_text((Path(__file__).parent / helper).read_text())
    (tmp_path / "mpi_launch.py").write_text("from pathlib import Path\nDATASETS_ROOT = None\n"
                                            "REPO_ROOT = Path(__file__).parent\n")
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "test_suite_cpu.json").write_text(json.dumps(
        {"files": {"test_one.py": {"wall_s": 1.0}, "test_two.py": {"wall_s": 3.0}}}))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--collect-only", str(tmp_path)], capture_output=True, text=True,
                          cwd=tmp_path)
    listed = [line for line in done.stdout.splitlines() if "::" in line]
    assert listed == ["test_two.py::test_a", "test_one.py::test_a"], done.stdout


def test_table_lists_the_top_files_then_the_rest_and_the_suite(tmp_path):
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(cpu_profile({"a.py::x": 1.0, "b.py::y": 5.0, "c.py::z": 3.0},
                                              {"a.py::x": 2.0, "b.py::y": 4.0, "c.py::z": 1.0})))
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "test_suite_table.py"
    done = subprocess.run([sys.executable, str(script), str(profile), "--top", "2"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[2:] == ["| `b.py` | 1 | 5 | 4 |", "| `c.py` | 1 | 3 | 1 |",
                                            "| 1 other file | 1 | 1 | 2 |",
                                            "| **the suite** | 3 | 9 | 7 |"]
    (tmp_path / "bad.json").write_text("{}")
    bad = subprocess.run([sys.executable, str(script), str(tmp_path / "bad.json")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "bad.json" in bad.stderr
