"""A package's names imported at their first use (PEP 562), so that importing the package
loads none of their heavy modules: ``gnnscale.comm`` and ``gnnscale.nn`` give their torch-free
names at once and the others through :func:`on_first_use`."""

from __future__ import annotations

from typing import Callable


def on_first_use(namespace: dict, names: tuple, load: Callable[[], dict]):
    """``(__getattr__, __dir__)`` for the package whose globals are ``namespace``: asked for
    any of ``names``, it calls ``load()``, which imports them (its body holds the package's
    ``from .module import name`` statements, the import edges the architecture checks read)
    and returns them by name; from then on they are in ``namespace``, found directly. Any
    other name is an AttributeError, so ``from package import submodule`` still imports the
    submodule."""
    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        loaded = load()
        namespace.update({key: loaded[key] for key in names})
        return loaded[name]

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
