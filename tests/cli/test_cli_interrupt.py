"""Ctrl-C: a real SIGINT sent to a running ``gnnscale`` process.

During training the run stops with exit code 130 and one line saying the epoch it stopped in,
the last checkpoint and the command that continues from it; while modules are still loading
it stops with code 130 and no traceback.

(Under ``mpirun``, Open MPI 5's launcher answers Ctrl-C by sending its ranks SIGTERM and
killing them tens of milliseconds later, no longer forwarding what they print: there is
nothing a rank can say there, so no case runs under it.)
"""

import shlex
import signal
import subprocess
import sys
import time

import pytest

from gnnscale.engine.checkpoint import read_checkpoint
from mpi_launch import REPO_ROOT, mpi_env

pytestmark = pytest.mark.timeout(300)

TRAIN = ["train", "--dataset", "sbm", "--num-nodes", "2000", "--threads", "1",
         "--epochs", "100000", "--no-progress", "--log-every", "1000"]


def start(args, cwd):
    return subprocess.Popen([sys.executable, "-m", "gnnscale", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=mpi_env(), cwd=cwd)


def interrupt(proc, timeout=60):
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"still running {timeout} s after SIGINT:\n{out}\n{err}")
    return proc.returncode, out, err


def wait_for_lines(path, count, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file() and len(path.read_text().splitlines()) >= count:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"{path} never reached {count} lines")


@pytest.mark.parametrize("checkpoints", ["written", "none yet", "no folder"])
def test_ctrl_c_in_training_says_where_it_stopped_and_how_to_go_on(checkpoints, tmp_path):
    metrics = tmp_path / "m.jsonl"
    every = {"written": "3", "none yet": "100000", "no folder": None}[checkpoints]
    args = [*TRAIN, "--metrics-out", str(metrics)]
    if every is not None:
        args += ["--checkpoint-dir", "ck", "--checkpoint-every", every]
    proc = start(args, tmp_path)
    wait_for_lines(metrics, 7, proc)
    code, out, err = interrupt(proc)
    assert code == 130, (code, out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    line = lines[0]
    done = len(metrics.read_text().splitlines())  # epochs completed
    assert line.startswith(f"interrupted in epoch {done + 1} of 100000; "), line
    if checkpoints == "no folder":
        assert "no checkpoint (--checkpoint-dir was not given)" in line, line
        return
    command = shlex.join(["gnnscale", *args, "--resume"])
    assert line.endswith(f"; continue with: {command}"), line
    if checkpoints == "none yet":
        assert "no checkpoint written yet (the first comes after epoch 100000)" in line, line
        assert not (tmp_path / "ck" / "latest.pt").exists()
        return
    saved = read_checkpoint(tmp_path / "ck")["epoch"]
    assert saved >= 6 and saved % 3 == 0 and done - 3 < saved <= done, (saved, done)
    assert f"last checkpoint ck/latest.pt after epoch {saved};" in line, line


@pytest.mark.parametrize("delay_s", [0.3, 0.8])
def test_ctrl_c_while_modules_load_prints_no_traceback(delay_s, tmp_path):
    proc = start(TRAIN, tmp_path)
    time.sleep(delay_s)
    assert proc.poll() is None
    code, out, err = interrupt(proc)
    assert code == 130, (code, out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "epoch" not in out  # it stopped before training started


def test_the_console_entry_point_module_loads_no_heavy_modules():
    """The console script imports gnnscale.cli.main before calling main(): torch loading
    there would be outside main's Ctrl-C handling."""
    code = ("import sys, gnnscale.cli.main; "
            "print(sorted(m for m in ('torch', 'numpy', 'gnnscale.comm') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO_ROOT, check=True)
    assert done.stdout.strip() == "[]", done.stdout
