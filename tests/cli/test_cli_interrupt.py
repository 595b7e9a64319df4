"""Ctrl-C: a real SIGINT sent to a running ``gnnscale`` process.

During training the run stops with exit code 130 and one line saying the epoch it stopped in,
the last checkpoint and the command that continues from it; while modules are still loading
it stops with code 130 and no traceback.

Under ``mpirun`` (Open MPI 5), Ctrl-C at the terminal makes the launcher send its ranks
SIGTERM and kill them a moment later, no longer forwarding what they print: rank 0 stops as
for Ctrl-C and writes its line to the terminal. That case runs ``mpirun`` on a pseudo-terminal
and presses Ctrl-C there; the launcher's own exit code is 1.
"""

import contextlib
import os
import pty
import re
import select
import shlex
import signal
import subprocess
import sys
import time

import pytest

from mpi_launch import REPO_ROOT, mpi_env, mpirun_path

from gnnscale.cli.common import mpirun_words
from gnnscale.engine.checkpoint import read_checkpoint

pytestmark = pytest.mark.timeout(600)

TRAIN = ["train", "--dataset", "sbm", "--num-nodes", "2000", "--threads", "1",
         "--epochs", "100000", "--no-progress", "--log-every", "1000"]


def at_a_terminal():
    """SIGINT as a shell at a terminal leaves it for its commands (a job started in the
    background by a script, CI's perhaps, inherits it ignored, and Python then keeps it so)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(args, cwd):
    return subprocess.Popen([sys.executable, "-m", "gnnscale", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=mpi_env(), cwd=cwd,
                            preexec_fn=at_a_terminal)


def interrupt(proc, timeout=60):
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"still running {timeout} s after SIGINT:\n{out}\n{err}")
    return proc.returncode, out, err


def wait_for_lines(path, count, proc, timeout=400):  # a fresh clone compiles the kernels first
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
    stopped = re.match(r"interrupted in epoch (\d+) of 100000; ", line)
    assert stopped, line
    done = int(stopped.group(1)) - 1  # the stopped epoch's predecessor completed; its line
    assert done - 1 <= len(metrics.read_text().splitlines()) <= done, line  # may not be out yet
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
    # the metrics line of an epoch is written before its checkpoint: Ctrl-C can fall between
    assert saved >= 6 and saved % 3 == 0 and done - 3 <= saved <= done, (saved, done)
    assert f"last checkpoint ck/latest.pt after epoch {saved};" in line, line


@pytest.mark.parametrize("delay_s", [0.3, 0.8])
def test_ctrl_c_while_modules_load_prints_no_traceback(delay_s, tmp_path):
    proc = start(TRAIN, tmp_path)
    time.sleep(delay_s)
    assert proc.poll() is None
    code, out, err = interrupt(proc)
    # 130: gnnscale's own exit; -SIGINT: the interpreter itself was still starting (a loaded
    # host) and had not yet installed its handler, so the signal ended it as it ends any program
    assert code == 130 or (code == -signal.SIGINT and not out and not err), (code, out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "epoch" not in out  # it stopped before training started


def test_ctrl_c_during_a_compiled_modules_import_arrives_after_it(tmp_path):
    """train loads torch with SIGINT held back (a KeyboardInterrupt inside torch's pybind11
    initialisation aborts the interpreter): a Ctrl-C in that window lets the import finish,
    then arrives as a KeyboardInterrupt."""
    (tmp_path / "interrupted_import.py").write_text(
        "import os, signal, time\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(0.2)  # where an unheld interrupt would land\n")
    code = ("import sys\n"
            f"sys.path.insert(0, {str(tmp_path)!r})\n"
            "from gnnscale.cli.main import _load_holding_interrupts\n"
            "try:\n"
            "    _load_holding_interrupts(['interrupted_import'])\n"
            "    print('not interrupted')\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted after the import', 'interrupted_import' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=60, preexec_fn=at_a_terminal)
    assert done.stdout.strip() == "interrupted after the import True", (done.stdout,
                                                                        done.stderr)


def train_dropping_an_interrupt(module, function):
    """``gnnscale train`` run in a child whose ``module.function`` first sends itself a SIGINT
    from a ``__del__``, where Python drops the KeyboardInterrupt."""
    code = ("import os, signal, sys\n"
            f"from gnnscale.cli import main, {module}\n"
            "class Dropped:\n"
            "    def __del__(self):\n"
            "        os.kill(os.getpid(), signal.SIGINT)  # its KeyboardInterrupt is dropped\n"
            f"plain = {module}.{function}\n"
            "def dropping_an_interrupt(*args):\n"
            "    Dropped()\n"
            "    return plain(*args)\n"
            f"{module}.{function} = dropping_an_interrupt\n"
            f"sys.exit(main.main({TRAIN!r}))\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=120, env=mpi_env(), preexec_fn=at_a_terminal)


def test_ctrl_c_dropped_while_the_job_is_set_up_still_stops_training():
    """Python drops a KeyboardInterrupt raised inside a ``__del__`` (or a weakref callback):
    one that lands there while ``train`` builds its job is remembered, and training stops
    after its first epoch with the usual line, instead of running on."""
    done = train_dropping_an_interrupt("train_cmd", "build_trainer")
    assert done.returncode == 130, (done.returncode, done.stderr[-2000:])
    assert done.stderr.startswith("interrupted in epoch 1 of 100000; "), done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr


def test_ctrl_c_dropped_while_modules_load_stops_before_the_command():
    """A Ctrl-C whose KeyboardInterrupt lands in importlib's module-lock callback (or any
    ``__del__``) before the command starts is dropped by Python: it is remembered, and the
    command stops before it starts, with code 130 and nothing printed."""
    done = train_dropping_an_interrupt("main", "build_parser")
    assert (done.returncode, done.stdout, done.stderr) == (130, "", ""), done


def test_the_console_entry_point_module_loads_no_heavy_modules():
    """The console script imports gnnscale.cli.main before calling main(): torch loading
    there would be outside main's Ctrl-C handling."""
    code = ("import sys, gnnscale.cli.main; "
            "print(sorted(m for m in ('torch', 'numpy', 'gnnscale.comm') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO_ROOT, check=True)
    assert done.stdout.strip() == "[]", done.stdout


class Terminal:
    """A command run on a pseudo-terminal, as a user starts it; what it shows is kept."""

    def __init__(self, argv, cwd):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child
            at_a_terminal()
            os.chdir(cwd)
            os.execve(argv[0], argv, mpi_env())
        self.shown = bytearray()

    def read_until(self, done, seconds) -> bool:
        """Collect output until ``done()`` (True) or the command exits or time is up
        (False)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if done():
                return True
            if select.select([self.fd], [], [], 0.1)[0]:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # closed: every process on it has exited
                    return False
                self.shown.extend(chunk)
        return False

    def close(self) -> str:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)
        return self.shown.decode(errors="replace").replace("\r", "")


def test_ctrl_c_at_the_terminal_under_mpirun_says_where_it_stopped(tmp_path):
    metrics = tmp_path / "m.jsonl"
    args = [*TRAIN, "--metrics-out", str(metrics), "--checkpoint-dir", "ck",
            "--checkpoint-every", "3"]
    terminal = Terminal([mpirun_path(), "-n", "2", "--oversubscribe", sys.executable, "-m",
                         "gnnscale", *args], tmp_path)
    try:
        started = terminal.read_until(
            lambda: metrics.is_file() and len(metrics.read_text().splitlines()) >= 7, 240)
        assert started, terminal.shown.decode(errors="replace")
        os.write(terminal.fd, b"\x03")  # Ctrl-C
        terminal.read_until(lambda: False, 20)
    finally:
        text = terminal.close()
    lines = [line for line in text.splitlines() if "interrupted in epoch" in line]
    assert len(lines) == 1, text  # rank 0 only
    saved = read_checkpoint(tmp_path / "ck")["epoch"]
    assert f"last checkpoint ck/latest.pt after epoch {saved};" in lines[0], lines[0]
    command = shlex.join([*mpirun_words(2), "gnnscale", *args, "--resume"])  # runs here
    assert lines[0].endswith(f"; continue with: {command}"), lines[0]


def test_ctrl_c_dropped_in_a_callback_still_stops_after_the_epoch(tmp_path, monkeypatch, capsys):
    """Python drops an exception raised in a weakref callback (the tensor caches forget entries
    in them): a Ctrl-C landing there stops training at the end of its epoch, quietly."""
    import weakref

    from gnnscale.cli import train_cmd
    from gnnscale.cli.main import main
    from gnnscale.engine import Trainer

    run_epoch = Trainer.run_epoch

    class Dies:
        pass

    def epoch_with_a_dropped_ctrl_c(self, *args, **kwargs):
        record = run_epoch(self, *args, **kwargs)
        if self.epoch == 3:  # as if Ctrl-C came while a callback ran
            doomed = Dies()
            ref = weakref.ref(doomed, lambda _: train_cmd._stop(signal.SIGINT, None))
            del doomed
            assert ref() is None
        return record

    monkeypatch.setattr(Trainer, "run_epoch", epoch_with_a_dropped_ctrl_c)
    metrics = tmp_path / "m.jsonl"
    before = signal.getsignal(signal.SIGINT)
    code = main([*TRAIN, "--metrics-out", str(metrics)])
    err = capsys.readouterr().err
    assert code == 130, err
    assert [line for line in err.splitlines() if line.strip()] == [
        line for line in err.splitlines() if line.startswith("interrupted in epoch 4 of")], err
    assert "Exception ignored" not in err and len(metrics.read_text().splitlines()) == 3
    assert signal.getsignal(signal.SIGINT) is before  # handed back


def test_ctrl_c_while_a_checkpoint_is_written_names_that_checkpoint(tmp_path, monkeypatch,
                                                                     capsys):
    """A Ctrl-C that lands while rank 0 writes a checkpoint waits for the write: the line names
    the checkpoint on disk, not the one before it."""
    import gnnscale.engine as engine
    from gnnscale.cli import train_cmd
    from gnnscale.cli.main import main

    write = engine.save_checkpoint

    def interrupted_write(trainer, *args, **kwargs):
        if trainer.epoch == 6:
            train_cmd._stop(signal.SIGINT, None)  # as if Ctrl-C came just before the rename
        return write(trainer, *args, **kwargs)

    monkeypatch.setattr(engine, "save_checkpoint", interrupted_write)
    ck = tmp_path / "ck"
    code = main([*TRAIN, "--checkpoint-dir", str(ck), "--checkpoint-every", "3"])
    err = capsys.readouterr().err
    assert code == 130, err
    assert read_checkpoint(ck)["epoch"] == 6
    assert f"interrupted in epoch 7 of 100000; last checkpoint {ck}/latest.pt after epoch 6;" \
        in err, err
