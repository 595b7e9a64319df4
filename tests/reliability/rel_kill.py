"""Helpers for tests that SIGKILL a rank of a running job (not part of gnnscale)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from mpi_launch import REPO_ROOT, mpi_env

FAIL_FAST_S = 30.0  # the promised bound: every rank gone within 30 s of the fault


def last_epoch(path) -> int:
    """The epoch of the last line of a metrics file (0 when absent or half written)."""
    try:
        lines = Path(path).read_text().splitlines()
        return json.loads(lines[-1]).get("epoch", 0) if lines else 0
    except (OSError, ValueError):
        return 0  # not there yet, or a line half written


def run_and_kill(cmd, pid_dir, metrics, victim, after_epoch, timeout=240):
    """Start ``cmd``; once ``metrics`` shows ``after_epoch``, SIGKILL rank ``victim`` (whose
    pid ``rel_fault_driver.py`` wrote to ``pid_dir``).

    Returns (completed process, seconds from the kill to the job's end).
    """
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=mpi_env(), cwd=REPO_ROOT, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while last_epoch(metrics) < after_epoch:
            assert proc.poll() is None, ("the job ended before the kill", proc.communicate())
            assert time.monotonic() < deadline, "no progress before the deadline"
            time.sleep(0.02)
        os.kill(int((Path(pid_dir) / f"rank-{victim}.pid").read_text()), signal.SIGKILL)
        killed_at = time.monotonic()
        out, err = proc.communicate(timeout=FAIL_FAST_S * 3)
        elapsed = time.monotonic() - killed_at
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), elapsed
