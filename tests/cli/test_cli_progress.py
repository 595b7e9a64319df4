"""Console output as a cluster job's log file sees it: plain epoch lines, no progress-bar frames;
a live bar only when rank 0's stderr is a terminal.

Each run is launched through a shell with stdout and stderr redirected to a file, exactly as a
batch script does (`gnnscale train ... > log 2>&1`, `mpirun -n 2 gnnscale train ... > log 2>&1`).
"""

import fcntl
import os
import pty
import struct
import termios
import re
import shlex
import subprocess
import sys

import pytest

from mpi_launch import REPO_ROOT, mpi_env, mpirun_path, run_command

pytestmark = pytest.mark.timeout(600)

EPOCHS = 20


def train_words(datasets_root):
    return [sys.executable, "-m", "gnnscale", "train", "--dataset", "cora", "--data-root",
            str(datasets_root), "--epochs", str(EPOCHS), "--log-every", "5", "--threads", "1"]


def run_to_log(words, log):
    """Run ``words > log 2>&1`` through the shell; returns the exit code and the log text."""
    command = f"{shlex.join(words)} > {shlex.quote(str(log))} 2>&1"
    done = run_command(["bash", "-c", command], timeout=400)
    return done.returncode, log.read_bytes().decode()


def assert_plain_log(text):
    assert "\r" not in text, repr(text[:2000])
    epochs = [int(m) for m in re.findall(r"^epoch +(\d+) ", text, flags=re.MULTILINE)]
    assert epochs == [1, 5, 10, 15, 20], text
    assert "training:" not in text and "epoch/s" not in text, text  # no tqdm frame anywhere
    lines = text.splitlines()
    summary = next(i for i, line in enumerate(lines) if line.startswith("done: "))
    last_epoch = max(i for i, line in enumerate(lines) if line.startswith("epoch "))
    assert last_epoch < summary  # the lines arrive in order, the summary last


def test_one_process_redirected_to_a_file(tmp_path, datasets_root):
    code, text = run_to_log(train_words(datasets_root), tmp_path / "log")
    assert code == 0, text
    assert_plain_log(text)


def test_mpirun_redirected_to_a_file(tmp_path, datasets_root):
    words = [mpirun_path(), "-n", "2", "--oversubscribe", *train_words(datasets_root)]
    code, text = run_to_log(words, tmp_path / "log")
    assert code == 0, text
    assert_plain_log(text)
    assert text.count("done: ") == 1  # rank 0 alone prints


def test_a_terminal_gets_a_live_bar_unless_no_progress(datasets_root):
    for extra, wanted in (([], True), (["--no-progress"], False)):
        leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
        proc = subprocess.Popen(train_words(datasets_root)[:-4] + ["--epochs", "3", *extra],
                                stdout=subprocess.PIPE, stderr=follower, env=mpi_env(),
                                cwd=REPO_ROOT)
        os.close(follower)
        terminal = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            terminal += chunk
        os.close(leader)
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, (out, terminal)
        assert (b"training:" in terminal and b"\r" in terminal) == wanted, terminal
        assert b"epoch    1 " in out  # the epoch lines still go to stdout
