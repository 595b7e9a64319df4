"""TensorCache (gnnscale/graph/tensor_cache.py): values found again by the very tensors at the
same versions, the tensors held only weakly, and its two eviction rules."""

import gc
import weakref

import pytest
import torch

from gnnscale.graph.tensor_cache import TensorCache


def test_a_value_is_served_for_the_same_tensors_at_the_same_versions_only():
    cache = TensorCache(2)
    rows, columns = torch.arange(4), torch.arange(8)
    assert cache.put("k", (rows, columns), "value") == "value"
    assert cache.get("k", (rows, columns)) == "value"
    assert cache.get("k", (rows.clone(), columns)) is None  # an equal tensor is another one
    assert cache.get("k", (rows, None), default="miss") == "miss"  # None matches only None
    assert cache.get("other", (rows, columns)) is None  # keys are separate
    rows.add_(0)  # an in-place change, even one keeping the values, is a new version
    assert cache.get("k", (rows, columns), default="miss") == "miss"


def test_get_or_build_builds_once_and_keeps_a_value_of_none():
    cache = TensorCache(2)
    rows, calls = torch.arange(3), []

    def build():
        calls.append(1)
        return None  # e.g. "every row": a real value, not a miss

    assert cache.get_or_build("k", (rows, None), build) is None
    assert cache.get_or_build("k", (rows, None), build) is None
    assert len(calls) == 1


def test_the_newest_slots_entries_are_kept_per_key():
    cache = TensorCache(2)
    a, b, c = torch.zeros(1), torch.zeros(1), torch.zeros(1)
    for tensor, value in ((a, "a"), (b, "b"), (c, "c")):
        cache.put("k", (tensor,), value)
    cache.put("other", (a,), "a2")
    assert cache.count("k") == 2 and cache.get("k", (a,)) is None
    assert [cache.get("k", (t,)) for t in (b, c)] == ["b", "c"]
    assert cache.get("other", (a,)) == "a2"


def test_the_cache_keeps_neither_the_tensors_nor_by_default_forgets_them_before_the_next_put():
    cache = TensorCache(2)
    rows = torch.arange(5)
    died = weakref.ref(rows)
    cache.put("k", (rows,), "value")
    del rows
    gc.collect()
    assert died() is None  # not kept alive by the cache
    assert cache.count("k") == 1  # its entry waits for the next value stored under "k"
    newer = torch.arange(2)
    cache.put("k", (newer,), "next")
    assert cache.count("k") == 1 and cache.get("k", (newer,)) == "next"  # the dead entry went


def test_forget_dead_at_once_drops_an_entry_and_its_value_when_a_tensor_dies():
    cache = TensorCache(2, forget_dead_at_once=True)
    rows, keep = torch.arange(5), torch.arange(3)
    value = torch.ones(7)
    value_ref = weakref.ref(value)
    cache.put("k", (rows,), value)
    cache.put("k", (keep,), "kept")
    del rows, value
    gc.collect()
    assert value_ref() is None and cache.count("k") == 1
    del keep
    gc.collect()
    assert "k" not in cache


def test_one_version_replaces_a_tensors_older_version_and_otherwise_it_ages_out():
    for one_version, expected in ((True, 2), (False, 3)):
        cache = TensorCache(3, one_version=one_version)
        x, y = torch.zeros(2), torch.zeros(2)
        cache.put("k", (x,), "x0")
        cache.put("k", (y,), "y0")
        x.add_(1.0)
        cache.put("k", (x,), "x1")
        assert cache.count("k") == expected
        assert cache.get("k", (x,)) == "x1" and cache.get("k", (y,)) == "y0"


def test_replace_swaps_a_stored_value_in_place():
    cache = TensorCache(2)
    a, b = torch.zeros(1), torch.zeros(1)
    cache.put("k", (a,), "old")
    cache.put("k", (b,), "b")
    cache.replace("k", (a,), "new")
    assert cache.get("k", (a,)) == "new"
    cache.put("k", (torch.zeros(1),), "c")  # "a" is still the oldest: it goes first
    assert cache.get("k", (a,)) is None
    with pytest.raises(KeyError, match="no value is stored under 'k'"):
        cache.replace("k", (a,), "x")
    with pytest.raises(ValueError, match="at least one slot per key, got 0"):
        TensorCache(0)
