"""Tests that run only in the DGL environment (`make dgl-test`, part of `make test`).

DGL 2.1.0 needs torch <= 2.2.1, so these tests run in a second environment that the Makefile
builds once (see `make dgl-env`). In any other environment every test in this folder is skipped
at collection, with the reason ``import dgl`` failed; modules here import dgl only inside tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _dgl_import_error() -> str | None:
    try:
        import dgl  # noqa: F401
    except Exception as exc:  # ImportError, or DGL failing against this torch build
        return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    return None


DGL_IMPORT_ERROR = _dgl_import_error()


def pytest_collection_modifyitems(config, items):
    if DGL_IMPORT_ERROR is None:
        return
    skip = pytest.mark.skip(reason=f"DGL environment only (`make dgl-test`); import dgl failed: "
                                   f"{DGL_IMPORT_ERROR}")
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)
