"""`gnnscale partition | info | tune` (the CLI glue over partitioning), run in-process."""

import json
import os

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
