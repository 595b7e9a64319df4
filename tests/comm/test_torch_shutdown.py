"""The torch backend ends a job without gloo threads alive while Python finalises.

A gloo worker drops a finished work item (and the tensors in it) after the waiter has
returned; if a group outlives the exit handler, that drop can run during finalisation and
abort the process ("terminate called without an active exception").
"""

from pathlib import Path

from mpi_launch import run_python_mpi

DRIVER = Path(__file__).parent / "torch_shutdown_driver.py"


def test_gloo_worker_threads_are_joined_before_the_interpreter_finalises():
    result = run_python_mpi(2, DRIVER, [], timeout=150)
    assert result.returncode == 0, result.stderr
    running = [line for line in result.stdout.splitlines() if line.startswith("running:")]
    at_exit = [line for line in result.stdout.splitlines() if line.startswith("at exit:")]
    assert len(running) == 2 and len(at_exit) == 2, result.stdout
    assert all("pt_gloo_runloop" in line for line in running), running  # the check sees them
    assert not any("pt_gloo_runloop" in line for line in at_exit), at_exit
