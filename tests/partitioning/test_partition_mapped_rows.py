"""Rows copied out of memory-mapped arrays: the same values as numpy's indexing, and the file's
pages do not stay mapped in the process (its resident memory grows by the result only)."""

import re
from pathlib import Path

import numpy as np
import pytest

from partitioning.mapped_rows import read_rows, take_rows


def rss_file_mib() -> float:
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"RssFile:\s+(\d+)", status).group(1)) / 1024


@pytest.fixture
def mapped(tmp_path):
    array = np.arange(4096 * 2048, dtype=np.float32).reshape(4096, 2048)  # 32 MiB
    np.save(tmp_path / "x.npy", array)
    return array, tmp_path / "x.npy"


@pytest.mark.parametrize("order", ["ascending", "shuffled"])
def test_take_rows_equals_indexing(mapped, order):
    array, path = mapped
    rows = np.flatnonzero(np.random.default_rng(0).random(4096) < 0.3)
    if order == "shuffled":
        rows = np.random.default_rng(1).permutation(np.concatenate([rows, rows[:5]]))
    got = take_rows(np.load(path, mmap_mode="r"), rows, window_bytes=1 << 20)
    np.testing.assert_array_equal(got, array[rows])
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(take_rows(array, rows), array[rows])  # in memory
    assert take_rows(np.load(path, mmap_mode="r"), rows[:0]).shape == (0, 2048)


def test_read_rows_copies_mapped_blocks_and_views_in_memory_ones(mapped):
    array, path = mapped
    mm = np.load(path, mmap_mode="r")
    block = read_rows(mm, 100, 900, dtype=np.float64)
    np.testing.assert_array_equal(block, array[100:900])
    assert block.dtype == np.float64 and type(block) is np.ndarray
    assert np.shares_memory(read_rows(array, 3, 9), array)
    flat = np.load(path, mmap_mode="r").reshape(-1)
    np.testing.assert_array_equal(read_rows(flat, 5, 70000), array.reshape(-1)[5:70000])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux /proc only")
def test_mapped_pages_are_released(mapped):
    _, path = mapped
    rows = np.arange(0, 4096, 3)  # a third of the rows, on every page of the file
    before = rss_file_mib()
    kept = take_rows(np.load(path, mmap_mode="r"), rows, window_bytes=1 << 20)
    assert rss_file_mib() - before < 6, "take_rows left the file mapped"
    for start in range(0, 4096, 512):
        read_rows(np.load(path, mmap_mode="r"), start, start + 512)
    assert rss_file_mib() - before < 6, "read_rows left the file mapped"
    control = np.load(path, mmap_mode="r")
    plain = control[rows]  # numpy's own indexing keeps every touched page mapped
    assert rss_file_mib() - before > 24
    np.testing.assert_array_equal(plain, kept)
