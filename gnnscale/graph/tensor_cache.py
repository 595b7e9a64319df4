"""Values computed from tensors, served again for the very same tensors at the same versions.

A graph keeps what it derived from tensors the caller passes again and again (the raw
features' aggregate, the blocks of the loss's rows): :class:`TensorCache` finds a value by
the identity and version (``tensor._version``, bumped by every in-place change) of one or more
tensors, under a key (e.g. a normalisation kind). It holds the tensors only by weak reference:
a cached value never keeps its tensors alive. Per key it keeps the newest ``slots`` entries;
two eviction rules are parameters:

* ``forget_dead_at_once``: an entry goes the moment one of its tensors dies (a weak reference
  callback; its value is freed with it), rather than when the next value is stored under its
  key (dead entries are then dropped before the newest ``slots`` are kept).
* ``one_version``: storing a value for a tensor drops the entries of that tensor's other
  versions (they can never be served again), rather than leaving them to age out.
"""

from __future__ import annotations

import weakref
from typing import Callable, Hashable, Sequence

import torch


class _Entry:
    """One value and the tensors (weakly referenced, with their versions) it was made from;
    ``None`` stands for an absent optional tensor."""

    __slots__ = ("refs", "versions", "value")

    def __init__(self, refs: tuple, versions: tuple, value):
        self.refs, self.versions, self.value = refs, versions, value

    def matches(self, tensors: Sequence[torch.Tensor | None]) -> bool:
        """Whether these are the very tensors, at the versions, the value was made from."""
        return len(tensors) == len(self.refs) and all(
            (ref is None and tensor is None)
            or (ref is not None and tensor is not None and ref() is tensor
                and version == tensor._version)
            for ref, version, tensor in zip(self.refs, self.versions, tensors))

    def alive(self) -> bool:
        """Whether every tensor the value was made from still lives."""
        return all(ref is None or ref() is not None for ref in self.refs)

    def made_from(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` (at any version) is one of the tensors of this entry."""
        return any(ref is not None and ref() is tensor for ref in self.refs)


class TensorCache:
    """Values keyed by ``key`` and the identity and version of a tuple of tensors (see the module
    doc); at most ``slots`` entries per key, newest first.

    ``get(key, tensors)`` serves a stored value (or ``default``), ``put`` stores one,
    ``get_or_build`` does both around a builder, ``replace`` swaps a stored value in place.
    ``tensors`` is a tuple of tensors, ``None`` standing for an absent optional one (matched
    only by ``None``).
    """

    def __init__(self, slots: int, *, forget_dead_at_once: bool = False,
                 one_version: bool = False):
        if slots < 1:
            raise ValueError(f"a tensor cache needs at least one slot per key, got {slots}")
        self.slots = slots
        self.forget_dead_at_once = forget_dead_at_once
        self.one_version = one_version
        self._entries: dict[Hashable, list[_Entry]] = {}

    def __contains__(self, key: Hashable) -> bool:
        """Whether any entry is stored under ``key``."""
        return key in self._entries

    def count(self, key: Hashable) -> int:
        """How many entries are stored under ``key``."""
        return len(self._entries.get(key, ()))

    def _find(self, key: Hashable, tensors: Sequence) -> _Entry | None:
        for entry in self._entries.get(key, ()):
            if entry.matches(tensors):
                return entry
        return None

    def get(self, key: Hashable, tensors: Sequence, default=None):
        """The value stored under ``key`` for these very tensors at their versions, else
        ``default``."""
        entry = self._find(key, tensors)
        return default if entry is None else entry.value

    def replace(self, key: Hashable, tensors: Sequence, value) -> None:
        """Swap the stored value for these tensors (which must have one) for ``value``,
        keeping its place."""
        entry = self._find(key, tensors)
        if entry is None:
            raise KeyError(f"no value is stored under {key!r} for these tensors")
        entry.value = value

    def put(self, key: Hashable, tensors: Sequence, value):
        """Store ``value`` as the newest entry under ``key`` for ``tensors``, dropping what the
        eviction rules drop; returns ``value``."""
        callback = self._forget_callback(key) if self.forget_dead_at_once else None
        refs = tuple(None if t is None else weakref.ref(t, callback) for t in tensors)
        entry = _Entry(refs, tuple(None if t is None else t._version for t in tensors), value)
        older = self._entries.get(key, [])
        if self.one_version:
            older = [e for e in older
                     if not any(t is not None and e.made_from(t) for t in tensors)]
        if not self.forget_dead_at_once:
            older = [e for e in older if e.alive()]
        self._entries[key] = [entry] + older[:self.slots - 1]
        return value

    def get_or_build(self, key: Hashable, tensors: Sequence, build: Callable[[], object]):
        """The stored value for these tensors, else ``build()``'s, stored."""
        entry = self._find(key, tensors)
        if entry is not None:
            return entry.value
        return self.put(key, tensors, build())

    def _forget_callback(self, key: Hashable):
        """A weak reference callback dropping, under ``key``, the entry whose tensor died."""
        entries = self._entries

        def forget(ref):  # a tensor died: the entries made from it can never be served
            left = [e for e in entries.get(key, ()) if not any(r is ref for r in e.refs)]
            if left:
                entries[key] = left
            else:
                entries.pop(key, None)
        return forget
