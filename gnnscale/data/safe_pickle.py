"""A restricted unpickler for the legacy pickle-based dataset formats (Planetoid).

``pickle.load`` runs whatever callable a file names, so a dataset downloaded from anywhere could
execute code. This unpickler resolves only the handful of globals that Planetoid's Python-2
pickles name (numpy arrays and dtypes, scipy CSR matrices, lists, dicts and ``defaultdict``);
any other global is refused with :class:`DataError`. Sparse matrices are not rebuilt by scipy's
own unpickling: their state is captured into :class:`PickledSparse` and turned into a checked
``scipy.sparse.csr_matrix`` afterwards, so a file cannot set arbitrary attributes on scipy objects.
"""

from __future__ import annotations

import collections
import io
import pickle
import pickletools
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gnnscale.errors import DataError

# Refuse arrays larger than this many elements while unpickling (a corrupt or hostile file can
# otherwise ask for terabytes); real Planetoid arrays are far below it.
_MAX_ARRAY_ELEMENTS = 1 << 31


class _NdarrayToken:
    """Stands for ``numpy.ndarray`` in a pickle: accepted by ``_reconstruct``, not callable."""


_NDARRAY = _NdarrayToken()


def _reconstruct(subtype, shape, dtype):
    if subtype is not _NDARRAY:
        raise DataError(f"pickle asks to build an array of type {subtype!r}; only numpy.ndarray "
                        "is allowed")
    size = int(np.prod(shape, dtype=np.int64)) if isinstance(shape, tuple) else int(shape)
    if size < 0 or size > _MAX_ARRAY_ELEMENTS:
        raise DataError(f"pickle asks for an array of shape {shape!r}; that is too large")
    return np.ndarray.__new__(np.ndarray, shape, dtype)


def _dtype(spec, align=False, copy=False):
    dtype = np.dtype(spec, align, copy)
    if dtype.hasobject:
        raise DataError(f"pickle asks for dtype {dtype}; object arrays are not allowed")
    return dtype


def _latin1_bytes(text, encoding="latin1"):
    # Python 3 writes bytes into protocol-2 pickles as _codecs.encode(str, "latin1").
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise DataError("pickle calls _codecs.encode with unexpected arguments")
    return text.encode("latin1")


def _frombuffer(buffer, dtype, shape, order):
    # numpy's protocol-5 array pickles: a raw buffer plus dtype and shape.
    if not isinstance(dtype, np.dtype) or dtype.hasobject:
        raise DataError(f"pickle asks for an array of dtype {dtype!r}; not allowed")
    return np.frombuffer(buffer, dtype=dtype).reshape(shape, order=order).copy()


class PickledSparse:
    """The state of a pickled scipy sparse matrix, captured without running scipy's code."""

    def __init__(self, *args, **kwargs):
        self.state: dict = {}

    def __setstate__(self, state) -> None:
        if not isinstance(state, dict):
            raise DataError("pickled sparse matrix has a malformed state")
        self.state = state

    def to_csr(self) -> sp.csr_matrix:
        """A validated ``scipy.sparse.csr_matrix`` built from the captured arrays."""
        state = self.state
        shape = state.get("_shape", state.get("shape"))
        arrays = [state.get(key) for key in ("data", "indices", "indptr")]
        if (not isinstance(shape, tuple) or len(shape) != 2
                or not all(isinstance(a, np.ndarray) for a in arrays)):
            raise DataError("pickled sparse matrix lacks data/indices/indptr/shape")
        if state.get("format", "csr") != "csr":
            raise DataError(f"pickled sparse matrix has format {state.get('format')!r}; "
                            "expected 'csr'")
        matrix = sp.csr_matrix(tuple(arrays), shape=tuple(int(s) for s in shape))
        matrix.check_format(full_check=True)
        return matrix


_ALLOWED = {
    ("numpy", "dtype"): _dtype,
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("_codecs", "encode"): _latin1_bytes,
    ("scipy.sparse.csr", "csr_matrix"): PickledSparse,
    ("scipy.sparse._csr", "csr_matrix"): PickledSparse,
    ("scipy.sparse", "csr_matrix"): PickledSparse,
    ("__builtin__", "list"): list,
    ("builtins", "list"): list,
    ("__builtin__", "dict"): dict,
    ("builtins", "dict"): dict,
    ("collections", "defaultdict"): collections.defaultdict,
    ("collections", "OrderedDict"): collections.OrderedDict,
}


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        target = _ALLOWED.get((module, name))
        if target is None:
            raise DataError(f"refusing to load {module}.{name}: only numpy arrays, scipy CSR "
                            "matrices, lists and dicts are allowed in dataset pickles")
        return target

    def persistent_load(self, pid):
        raise DataError("refusing a pickle with persistent ids")


def safe_load(path: str | Path):
    """Unpickle ``path`` (Python-2 pickles: ``encoding="latin1"``) admitting only data types.

    Sparse matrices come back as validated ``scipy.sparse.csr_matrix``. Any refused global,
    corrupt or truncated file raises :class:`DataError` naming the file.
    """
    path = Path(path)
    try:
        payload = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None
    return safe_loads(payload, origin=str(path))


def safe_loads(payload: bytes, origin: str = "<bytes>"):
    """Like :func:`safe_load` for bytes already in memory; ``origin`` names them in errors."""
    try:
        _prescan(payload)
        obj = _RestrictedUnpickler(io.BytesIO(payload), encoding="latin1").load()
        return _finish(obj)
    except DataError as exc:
        raise DataError(f"{origin}: {exc}") from None
    except Exception as exc:  # corrupt data surfaces as many exception types
        raise DataError(f"{origin} is not a readable dataset pickle "
                        f"({type(exc).__name__}: {exc}); re-download the file") from None


_MEMO_OPS = frozenset({"PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET"})


def _prescan(payload: bytes) -> None:
    """Walk the opcodes (pure Python, linear) before unpickling for real.

    CPython's unpickler sizes its memo table by the largest index a pickle names, so a single
    corrupt byte in a ``LONG_BINPUT`` can make it allocate and clear gigabytes (a minute or an
    out-of-memory kill). Valid pickles never name a memo slot beyond the number of opcodes seen
    so far; this also rejects unknown opcodes and lengths that run past the end up front.
    """
    for count, (opcode, arg, _) in enumerate(pickletools.genops(payload), start=1):
        if opcode.name in _MEMO_OPS and int(arg) > count:
            raise DataError(f"pickle names memo slot {arg} after only {count} opcodes; the "
                            "file is corrupt")


def _finish(obj, seen=None):
    """Replace captured sparse states by checked CSR matrices, inside lists and dicts too."""
    if isinstance(obj, PickledSparse):
        return obj.to_csr()
    seen = set() if seen is None else seen
    if isinstance(obj, (list, dict)) and id(obj) not in seen:
        seen.add(id(obj))  # pickles can build self-referencing containers
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        for key, value in list(items):
            if isinstance(value, (PickledSparse, list, dict)):
                obj[key] = _finish(value, seen)
    return obj
