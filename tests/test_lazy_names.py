"""``gnnscale/lazy_names.py``: a package's names imported at their first use, and the two
packages that use it (``gnnscale.comm``, ``gnnscale.nn``) importing no torch until then."""

import subprocess
import sys

import pytest

from mpi_launch import REPO_ROOT

from gnnscale.lazy_names import on_first_use


def test_names_load_once_at_their_first_use():
    calls = []

    def load():
        calls.append(1)
        return {"heavy": 41, "other": 42}

    namespace = {"__name__": "pkg", "light": 0}
    getattr_, dir_ = on_first_use(namespace, ("heavy", "other"), load)
    assert "heavy" not in namespace and not calls
    assert getattr_("other") == 42 and namespace["heavy"] == 41 and len(calls) == 1
    assert dir_() == ["__name__", "heavy", "light", "other"]
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'nope'"):
        getattr_("nope")
    assert len(calls) == 1


def test_comm_and_nn_import_no_torch_until_a_name_that_needs_it_is_used():
    code = ("import sys, types\n"
            "import gnnscale.comm, gnnscale.nn\n"
            "from gnnscale.comm import BACKENDS, detect_launch, env_rank\n"
            "from gnnscale.nn import MODEL_NAMES\n"
            "print('torch' in sys.modules, env_rank(), 'gcn' in MODEL_NAMES)\n"
            "from gnnscale.comm import SingleCommunicator, init\n"
            "from gnnscale.nn import GNN, dropout\n"
            "print('torch' in sys.modules, isinstance(init('single'), SingleCommunicator),\n"
            "      isinstance(dropout, types.ModuleType), GNN.__module__)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO_ROOT, check=True)
    assert done.stdout.split("\n")[:2] == ["False 0 True", "True True True gnnscale.nn.models"], \
        done.stdout + done.stderr
