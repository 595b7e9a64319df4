"""The suite's own accounting: ``--cpu-profile FILE`` (tests/conftest.py)."""

import json
import subprocess
import sys
from pathlib import Path

from conftest import cpu_profile


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
    conftest = (Path(__file__).parent / "conftest.py").read_text()
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "mpi_launch.py").write_text("DATASETS_ROOT = None\n")
    out = tmp_path / "profile.json"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--cpu-profile", str(out), str(tmp_path)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    profile = json.loads(out.read_text())
    assert profile["tests"] == 2 and list(profile["files"]) == ["test_two.py"]
    assert set(profile["tests_by_cpu"]) == {"test_two.py::test_a", "test_two.py::test_b"}
