"""``train --resume`` against a checkpoint written with other settings: a different model,
width or dataset is refused with one line naming the setting and both values (old
checkpoints without settings: one line from the first shape mismatch); a different ``--lr``
or ``--weight-decay`` is honoured from the next epoch and said in one line."""

import pytest

from gnnscale.engine.checkpoint import _encode, read_checkpoint, write_atomic
from test_cli_outputs import run_in_process as run

pytestmark = pytest.mark.timeout(300)

BASE = ["train", "--backend", "single", "--threads", "1", "--no-progress", "--dataset", "sbm",
        "--num-nodes", "300", "--epochs", "2"]


@pytest.fixture
def checkpoint(tmp_path, capsys):
    folder = tmp_path / "ck"
    code, _, err = run([*BASE, "--checkpoint-dir", str(folder)], capsys)
    assert code == 0, err
    return folder


MISMATCHES = {  # changed options: (setting, the checkpoint's value, this run's value)
    "model": (["--model", "sage"], ("--model", "gcn", "sage")),
    "width": (["--hidden", "32"], ("--hidden", "16", "32")),
    "depth": (["--layers", "3"], ("--layers", "2", "3")),
    "dataset size": (["--num-nodes", "400"], ("--num-nodes", "300", "400")),
    "dataset": (["--dataset", "rmat"], ("--dataset", "sbm", "rmat")),
}


@pytest.mark.parametrize("case", sorted(MISMATCHES))
def test_other_settings_are_refused_naming_the_setting(case, checkpoint, capsys):
    extra, (name, old, new) = MISMATCHES[case]
    code, out, err = run([*BASE, "--checkpoint-dir", str(checkpoint), "--resume",
                          "--epochs", "3", *extra], capsys)
    assert code == 2, (code, out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"written with {name} {old}; this run has {name} {new}" in lines[0], lines[0]
    assert read_checkpoint(checkpoint)["epoch"] == 2  # nothing trained, nothing overwritten


def test_a_checkpoint_without_settings_gives_one_line_from_the_shapes(checkpoint, capsys):
    state = read_checkpoint(checkpoint)
    del state["settings"]  # as a checkpoint written before settings were recorded
    write_atomic(checkpoint / "latest.pt", _encode(state))
    code, out, err = run([*BASE, "--checkpoint-dir", str(checkpoint), "--resume",
                          "--hidden", "32"], capsys)
    assert code == 2, (code, out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "does not fit this model: size mismatch for" in lines[0], lines[0]
    assert "torch.Size([16" in lines[0] and "torch.Size([32" in lines[0], lines[0]


def test_a_new_learning_rate_is_honoured_and_said(checkpoint, capsys):
    assert read_checkpoint(checkpoint)["settings"]["--hidden"] == 16
    code, out, err = run([*BASE, "--checkpoint-dir", str(checkpoint), "--resume",
                          "--epochs", "4", "--lr", "0.005", "--weight-decay", "0.001"], capsys)
    assert code == 0, err
    assert "--lr 0.005 applies from epoch 3 on (the checkpoint was trained with 0.01)" in out
    assert "--weight-decay 0.001 applies from epoch 3 on (the checkpoint was trained with " \
           "0.0005)" in out
    groups = read_checkpoint(checkpoint)["optimizer"]["param_groups"]
    assert {g["lr"] for g in groups} == {0.005} and {g["weight_decay"] for g in groups} == {0.001}
    code, out, err = run([*BASE, "--checkpoint-dir", str(checkpoint), "--resume",
                          "--epochs", "5", "--lr", "0.005", "--weight-decay", "0.001"], capsys)
    assert code == 0, err
    assert "applies from" not in out  # the same settings again: nothing to say


def test_a_switch_not_given_reads_as_such(checkpoint, capsys):
    code, _, err = run([*BASE, "--checkpoint-dir", str(checkpoint), "--resume", "--residual"],
                       capsys)
    assert code == 2 and "written with no --residual; this run has --residual (" in err, err
