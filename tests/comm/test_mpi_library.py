"""load_mpi: Open MPI's abort delay set before MPI starts, unless the user chose one.

What the delay buys (the launcher names a rank that died on another host) is checked across
hosts in tests/cluster/test_cross_host_faults.py."""

import os

import pytest

from gnnscale.comm.mpi_library import ABORT_DELAY_S, load_mpi


def test_the_abort_delay_is_set_by_default(monkeypatch):
    monkeypatch.delenv("OMPI_MCA_opal_abort_delay", raising=False)
    monkeypatch.delenv("OMPI_MCA_mpi_abort_delay", raising=False)
    MPI = load_mpi()
    assert MPI.COMM_WORLD.Get_size() >= 1
    assert os.environ["OMPI_MCA_opal_abort_delay"] == str(ABORT_DELAY_S)


@pytest.mark.parametrize("name", ["OMPI_MCA_opal_abort_delay", "OMPI_MCA_mpi_abort_delay"])
def test_a_delay_the_user_set_wins(monkeypatch, name):
    monkeypatch.delenv("OMPI_MCA_opal_abort_delay", raising=False)
    monkeypatch.delenv("OMPI_MCA_mpi_abort_delay", raising=False)
    monkeypatch.setenv(name, "0")
    load_mpi()
    assert os.environ[name] == "0"
    assert (name == "OMPI_MCA_opal_abort_delay") or "OMPI_MCA_opal_abort_delay" not in os.environ


def test_the_running_librarys_abort_delay_can_be_set():
    import ctypes

    from gnnscale.comm.mpi_library import _loaded_libraries, set_abort_delay

    load_mpi()
    libraries = _loaded_libraries("libopen-pal")
    assert libraries, "Open MPI's libopen-pal is not mapped into this process"
    delay = ctypes.c_int.in_dll(ctypes.CDLL(libraries[0]), "opal_abort_delay")
    before = delay.value
    try:
        assert set_abort_delay(7) and delay.value == 7
        assert set_abort_delay(0) and delay.value == 0
    finally:
        delay.value = before
    assert _loaded_libraries("no-such-library") == []
