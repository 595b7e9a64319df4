"""Dataset names: one list everywhere (``train --dataset``'s error, ``datasets list``,
``load_dataset``), a close name suggested, and a path that does not exist said as a path."""

import re

import pytest

from gnnscale.data.load import (DATASET_NAMES, GENERATED, SHIPPED_ONLY, _ALIASES,
                                _FILE_DATASETS)
from gnnscale.data.registry import REGISTRY
from test_cli_outputs import run_in_process

TRAIN = ["train", "--backend", "single", "--epochs", "1", "--no-progress"]


def error_line(argv, capsys):
    code, _, err = run_in_process(argv, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err)
    return lines[0]


def test_every_known_name_loads_by_that_name():
    for name in DATASET_NAMES:
        if name not in GENERATED:
            assert _ALIASES.get(name.lower(), name.lower()) in _FILE_DATASETS, name
    assert "ca-astroph" in DATASET_NAMES and "astro-ph-cc1" not in DATASET_NAMES
    assert "ogbn-papers100M" in DATASET_NAMES and "ogbn-papers100m" not in DATASET_NAMES


def test_the_error_lists_what_datasets_list_shows(capsys):
    line = error_line([*TRAIN, "--dataset", "nosuchname"], capsys)
    listed = re.search(r"not a known name \(([^)]*)\)", line).group(1).split(", ")
    assert listed == list(DATASET_NAMES)
    code, out, _ = run_in_process(["datasets", "list", "--data-root", "/nonexistent"], capsys)
    assert code == 0
    rows = [line.split()[0] for line in out.splitlines()[1:] if not line.startswith("also")]
    also = next(line for line in out.splitlines() if line.startswith("also by name:"))
    assert rows == list(REGISTRY)
    for name in (*SHIPPED_ONLY, *GENERATED):
        assert name in also, (name, also)
    assert sorted(rows + list(SHIPPED_ONLY) + list(GENERATED)) == sorted(DATASET_NAMES)


@pytest.mark.parametrize("typo,meant", [("croa", "cora"), ("citseer", "citeseer"),
                                        ("ogbn-arxv", "ogbn-arxiv"), ("tolokes", "tolokers"),
                                        ("ca-astroh", "ca-astroph")])
def test_a_close_name_is_suggested(typo, meant, capsys):
    line = error_line([*TRAIN, "--dataset", typo], capsys)
    assert f"unknown dataset {typo!r} (did you mean {meant!r}?)" in line, line
    line = error_line(["datasets", "download", typo], capsys) if meant in REGISTRY else None
    assert line is None or f"(did you mean {meant!r}?)" in line


def test_no_suggestion_for_a_name_close_to_nothing(capsys):
    assert "did you mean" not in error_line([*TRAIN, "--dataset", "zzzzqqq"], capsys)


@pytest.mark.parametrize("path", ["/no/such/graph", "data/missing", "graph.npz",
                                  "./cora", "~/nowhere/g.txt"])
def test_a_missing_path_is_said_as_a_path_without_the_names(path, capsys):
    line = error_line([*TRAIN, "--dataset", path], capsys)
    assert f"dataset {path}: no such file or directory" in line, line
    assert "known name" not in line and "cora, citeseer" not in line
