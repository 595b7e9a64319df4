"""The commands gnnscale suggests run as printed on this machine: `partition`'s mpirun line (more
ranks than cores, as root, without Open MPI's permissive variables set) and Ctrl-C's resume line."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from mpi_launch import DATASETS_ROOT, REPO_ROOT, mpi_env

from gnnscale.cli.common import mpirun_words
from gnnscale.cli.train_cmd import resume_command


def plain_env() -> dict:
    """The environment of a user who set none of Open MPI's variables."""
    env = mpi_env({"GNNSCALE_MAX_EPOCHS": "1"})
    for name in [n for n in env if n.startswith(("OMPI_", "PRTE_"))]:
        del env[name]
    return env


def test_partitions_suggested_mpirun_runs_as_printed(tmp_path):
    store = tmp_path / "cora-4"
    env = plain_env()
    done = subprocess.run([sys.executable, "-m", "gnnscale", "partition", "--dataset", "cora",
                           "--data-root", str(DATASETS_ROOT), "--parts", "4", "--out",
                           str(store)], capture_output=True, text=True, env=env, cwd=REPO_ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    command = re.search(r"\(run: (mpirun .*)\)", done.stdout).group(1)
    words = shlex.split(command)
    assert words[:3] == ["mpirun", "-n", "4"]
    if len(os.sched_getaffinity(0)) < 4:
        assert "--oversubscribe" in words
    ran = subprocess.run(words, capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=300)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "done: 1 epochs" in ran.stdout


def test_resume_line_runs_here_too():
    many = len(os.sched_getaffinity(0)) + 1
    line = resume_command(["train", "--dataset", "cora"], many)
    assert line.startswith(shlex.join(mpirun_words(many)))
    assert "--oversubscribe" in line and line.endswith("train --dataset cora --resume")
    assert ("--allow-run-as-root" in line) == (os.geteuid() == 0)
    assert resume_command(["train"], 1) == "gnnscale train --resume"
