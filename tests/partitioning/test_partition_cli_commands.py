"""`gnnscale partition | info | tune` (the CLI glue over partitioning), run in-process."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
from gnnscale.cli.main import main  # noqa: E402
from partitioning.store import part_file_name, read_part  # noqa: E402

SBM = ["--dataset", "sbm", "--num-nodes", "300"]


def test_partition_then_info(tmp_path, capsys):
    out = tmp_path / "store"
    assert main(["partition", *SBM, "--method", "fennel", "--parts", "3",
                 "--param", "passes=2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "edge cut" in printed and "wrote" in printed
    arrays = read_part(out, 2, expected_num_parts=3)
    assert {"owned_nodes", "halo_nodes", "x", "y", "mask_train"} <= set(arrays)
    assert main(["info", str(out)]) == 0
    assert "OK" in capsys.readouterr().out
    assert main(["info", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["num_parts"] == 3 and summary["params"]["passes"] == 2


def test_partition_bad_input_exits_2_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    assert main(["partition", *SBM, "--parts", "2",
                 "--out", str(tmp_path / "afile" / "s")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    (tmp_path / "afile").unlink()
    assert main(["partition", *SBM, "--parts", "301", "--out", str(tmp_path / "s")]) == 2
    assert "num_parts=301 exceeds the number of nodes (300)" in capsys.readouterr().err
    assert main(["partition", *SBM, "--parts", "2", "--param", "bogus=1",
                 "--out", str(tmp_path / "s")]) == 2
    assert "unknown parameter 'bogus'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["partition", *SBM, "--parts", "0", "--out", str(tmp_path / "s")])
    assert exc.value.code == 2
    assert os.listdir(tmp_path) == []


def test_info_refuses_damaged_store(tmp_path, capsys):
    out = tmp_path / "store"
    assert main(["partition", *SBM, "--method", "random", "--parts", "2", "--out", str(out)]) == 0
    target = out / part_file_name(0)
    target.write_bytes(target.read_bytes()[:-10])
    capsys.readouterr()
    assert main(["info", str(out)]) == 2
    assert "part-00000.npz" in capsys.readouterr().err
    assert main(["info", str(tmp_path / "none")]) == 2


def test_tune_writes_json_and_png(tmp_path, capsys):
    prefix = tmp_path / "tune"
    assert main(["tune", *SBM, "--methods", "random,metis,libra", "--parts", "2,4,1000",
                 "--out", str(prefix), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "recommended:" in printed and "skipping part counts" in printed
    result = json.loads(prefix.with_suffix(".json").read_text())
    assert len(result["rows"]) == 6 and result["recommended"]["method"] in {"random", "metis",
                                                                            "libra"}
    assert prefix.with_suffix(".png").stat().st_size > 1000
    assert main(["tune", *SBM, "--methods", "nope", "--out", str(prefix)]) == 2


def test_tune_calibrate_in_a_subprocess(tmp_path):
    # Own process: --calibrate initialises the communicator.
    code = ("import sys; from gnnscale.cli.main import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run(
        [sys.executable, "-c", code, "tune", *SBM, "--methods", "random", "--parts", "2",
         "--calibrate", "--no-plot", "--no-progress", "--out", str(tmp_path / "t")],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    constants = json.loads((tmp_path / "t.json").read_text())["cost_model"]
    assert constants["gamma_edge"] > 0 and constants["gamma_flop"] > 0
    assert np.isfinite(constants["gamma_edge"])
