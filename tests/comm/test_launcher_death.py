"""A rank ends with the launcher process that started it (gnnscale.comm.guard.launcher_death).

A rank's parent is SIGKILLed and the rank must be gone within moments: directly (a parent
process standing in for the launcher, with the launcher's environment) and under a real
``mpirun`` whose ranks would otherwise wait out Open MPI's abort delay, set long here. A process
given ``RANK``/``WORLD_SIZE`` by hand is not tied to the shell that started it.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpi_launch import REPO_ROOT, alive, kill_session, mpi_env, mpirun_path, still_alive_after

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")]

CHILD = """
import os, sys, time
from gnnscale.comm.guard.launcher_death import end_with_launcher
from gnnscale.comm.launch import detect_launch
print(end_with_launcher(detect_launch()), flush=True)
time.sleep(120)
"""

PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE, text=True)
print(child.pid, child.stdout.readline().strip(), flush=True)
child.wait()
"""


def parent_and_child(launcher_env: dict) -> tuple[subprocess.Popen, int, str]:
    env = {k: v for k, v in mpi_env(launcher_env).items()
           if not k.startswith(("OMPI_COMM_WORLD", "PMIX_", "PMI_", "SLURM_"))}
    env.update(launcher_env)
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD], env=env, cwd=REPO_ROOT,
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    pid, tied = parent.stdout.readline().split()
    return parent, int(pid), tied


@pytest.mark.parametrize("launcher_env", [
    {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"},
    {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"},
    {"RANK": "1", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "job"},
], ids=["mpirun", "srun", "torchrun"])
def test_rank_ends_when_its_launcher_is_killed(launcher_env):
    parent, child, tied = parent_and_child(launcher_env)
    try:
        assert tied == "True"
        assert alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert still_alive_after([child], 5) == []
    finally:
        kill_session(parent.pid)


def test_ranks_set_by_hand_outlive_the_shell_that_started_them():
    parent, child, tied = parent_and_child({"RANK": "1", "WORLD_SIZE": "2"})
    try:
        assert tied == "False"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        time.sleep(0.5)
        assert alive(child)
    finally:
        kill_session(parent.pid)


def test_ranks_of_a_killed_mpirun_end_at_once(tmp_path):
    """Open MPI ends the orphans too, after its abort delay (20 s here, as a user may set):
    without gnnscale's tie to the launcher they would train on for those 20 s."""
    metrics = tmp_path / "run.jsonl"
    pid_dir = tmp_path / "pids"
    driver = Path(__file__).parents[1] / "reliability" / "rel_fault_driver.py"
    cmd = [mpirun_path(), "-n", "2", "--oversubscribe", sys.executable, str(driver),
           "--pid-dir", str(pid_dir), "--", "--dataset", "sbm", "--num-nodes", "300",
           "--epochs", "100000", "--no-progress", "--threads", "1", "--metrics-out",
           str(metrics)]
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=mpi_env({"OMPI_MCA_opal_abort_delay": "20"}), cwd=REPO_ROOT,
                           start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not (metrics.exists() and metrics.read_text().count("\n") >= 2):
            assert job.poll() is None, job.communicate()
            assert time.monotonic() < deadline, "no epoch finished in 90 s"
            time.sleep(0.05)
        ranks = [int((pid_dir / f"rank-{r}.pid").read_text()) for r in range(2)]
        os.kill(job.pid, signal.SIGKILL)
        job.communicate()
        assert still_alive_after(ranks, 5) == [], "ranks still training after mpirun was killed"
    finally:
        kill_session(job.pid)
