"""Loader fuzzing: random, mutated and truncated files give a DataError, never a crash or hang.

Every case either loads a valid graph or raises a GnnscaleError (DataError for files); any
other exception is a bug. Hypothesis runs derandomised so the suite is reproducible.
"""

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnnscale.data import GraphData, generate_sbm, load_dataset
from gnnscale.data.safe_pickle import safe_loads
from gnnscale.errors import GnnscaleError

from data_ogb_layout import write_ogb, write_ogb_binary

FUZZ = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

pytestmark = pytest.mark.timeout(300)


def loads_or_refuses(path, **options):
    """Load ``path``; a GnnscaleError is a fine answer, a valid graph too, anything else fails."""
    try:
        graph = load_dataset(path, **options)
    except GnnscaleError:
        return None
    assert isinstance(graph, GraphData)
    graph.validate()
    return graph


@FUZZ
@given(payload=st.binary(max_size=4096),
       suffix=st.sampled_from([".npz", ".txt", ".txt.gz", ".tsv", ".el.gz"]))
def test_random_bytes_with_any_suffix(tmp_path, payload, suffix):
    path = tmp_path / f"random{suffix}"
    path.write_bytes(payload)
    loads_or_refuses(path)


@FUZZ
@given(text=st.text(alphabet="0123456789 \t\n#-x.e", max_size=300), compress=st.booleans())
def test_edge_list_like_text(tmp_path, text, compress):
    path = tmp_path / ("edges.txt.gz" if compress else "edges.txt")
    path.write_bytes(gzip.compress(text.encode()) if compress else text.encode())
    loads_or_refuses(path)


@FUZZ
@given(payload=st.binary(max_size=2048))
def test_random_bytes_as_pickle(payload):
    try:
        safe_loads(payload)
    except GnnscaleError:
        pass


def _mutate(data: bytes, positions, values) -> bytes:
    mutated = bytearray(data)
    for position, value in zip(positions, values):
        mutated[position % len(mutated)] = value
    return bytes(mutated)


@pytest.fixture
def cora_copy(datasets, tmp_path):
    target = tmp_path / "Cora" / "raw"
    shutil.copytree(datasets / "Cora" / "raw", target)
    for file in target.iterdir():
        file.chmod(0o644)
    return target


@settings(FUZZ, max_examples=25)
@given(part=st.sampled_from(["graph", "allx", "ally", "tx", "ty", "x", "y", "test.index"]),
       positions=st.lists(st.integers(0, 1 << 20), min_size=1, max_size=4),
       values=st.lists(st.integers(0, 255), min_size=4, max_size=4),
       truncate=st.booleans())
def test_mutated_or_truncated_planetoid_files(cora_copy, part, positions, values, truncate):
    file = cora_copy / f"ind.cora.{part}"
    original = file.read_bytes()
    try:
        if truncate:
            file.write_bytes(original[: positions[0] % len(original)])
        else:
            file.write_bytes(_mutate(original, positions, values))
        loads_or_refuses(cora_copy.parent)
    finally:
        file.write_bytes(original)


@pytest.mark.parametrize("relative", [
    "minesweeper/raw/minesweeper.npz",
    "SNAP-facebook-combined/raw/facebook-combined.txt.gz",
])
def test_truncated_and_mutated_real_files(datasets, tmp_path, relative):
    source = datasets / relative
    target = tmp_path / source.name
    assert fuzz_file(source.read_bytes(), target, target) >= 20


def fuzz_file(original: bytes, file: Path, target: Path) -> int:
    """Write truncated and mutated copies of ``original`` to ``file`` (hypothesis picks the
    cut and the bytes) and load ``target`` after each; returns the number of examples."""
    runs = []

    @FUZZ
    @given(cut=st.integers(0, len(original) - 1),
           positions=st.lists(st.integers(0, len(original) - 1), max_size=3),
           values=st.lists(st.integers(0, 255), min_size=3, max_size=3))
    def check(cut, positions, values):
        runs.append(cut)
        file.write_bytes(original[:cut])
        loads_or_refuses(target)
        if positions:
            file.write_bytes(_mutate(original, positions, values))
            loads_or_refuses(target)

    check()
    return len(runs)


def test_random_bytes_in_an_ogb_folder(tmp_path):
    folder = write_ogb(tmp_path / "ogbn_fuzz", generate_sbm(num_nodes=40, num_classes=2,
                                                            num_val=5, num_test=5))
    rng = np.random.default_rng(0)
    files = sorted(p for p in folder.rglob("*.csv.gz"))
    for file in files:
        original = file.read_bytes()
        for size in (0, 7, 300):
            file.write_bytes(rng.bytes(size))
            loads_or_refuses(folder)
            file.write_bytes(gzip.compress(rng.bytes(size)))
            loads_or_refuses(folder)
        file.write_bytes(original)
    assert loads_or_refuses(folder) is not None


def test_truncated_and_mutated_ogb_binary_and_pyg_npz(tmp_path):
    graph = generate_sbm(num_nodes=40, num_classes=2, num_val=5, num_test=5)
    folder = write_ogb_binary(tmp_path / "papers_fuzz", graph)
    pyg = tmp_path / "pyg.npz"
    np.savez(pyg, edge_index=graph.edge_index(), x=graph.x, y=graph.y,
             train_mask=graph.train_mask, val_mask=graph.val_mask, test_mask=graph.test_mask)
    runs = 0
    for file, target in ((folder / "raw" / "data.npz", folder),
                         (folder / "raw" / "node-label.npz", folder), (pyg, pyg)):
        original = file.read_bytes()
        runs += fuzz_file(original, file, target)
        file.write_bytes(original)
    assert runs >= 60
    assert loads_or_refuses(folder) is not None and loads_or_refuses(pyg) is not None
