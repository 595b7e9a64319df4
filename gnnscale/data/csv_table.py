"""Fast reading of header-less numeric CSV tables (``.csv`` or ``.csv.gz``) into numpy arrays.

The OGB node-property files hold tens of millions of lines (``edge.csv.gz`` of ogbn-products:
62M); :func:`read_csv_table` parses them with the compiled parsers of
:mod:`gnnscale.data.numeric_csv` (gzip inflated by ISA-L in a background thread,
``isal.igzip_threaded``) window by window straight into one preallocated array of the final
dtype (int64 ids, float32 features), so no Python objects and no float64 copy of the table are
ever made: the peak is the result plus one window. Float tables whose values are mostly
spellings the compiled parser leaves to Python (NaN, 18+ digits) go through pyarrow's CSV
reader batch by batch instead. Any problem with the file (unreadable, truncated gzip, a row with
another column count, a value that is not a number of the asked type) is one-line
:class:`DataError` naming the file and the offending value.
"""

from __future__ import annotations

import contextlib
import gzip
import zlib
from pathlib import Path

import numpy as np

from gnnscale.data.background import stop_if_cancelled
from gnnscale.data.numeric_csv import TooManySlowValues, parse_numeric_table
from gnnscale.errors import DataError

# pyarrow parses blocks of this many bytes; one block's rows are converted at a time, so this
# also bounds the extra memory beyond the result (a few times the block size).
BLOCK_BYTES = 4 << 20
_PEEK_BYTES = 1 << 20  # the first line must fit in this many bytes (100k-feature rows do)
_SHOWN = 80  # characters of a bad value or row quoted in an error


_DTYPES = (np.dtype(np.int64), np.dtype(np.float32), np.dtype(np.float64))


def first_line(path: Path) -> bytes:
    """The first non-blank line of ``path`` (``b""``: none), read through gzip by name."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            while True:
                line = handle.readline(_PEEK_BYTES)
                if not line or line.strip():
                    break
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"{path} is not readable ({type(exc).__name__}: {exc})") from None
    if len(line) >= _PEEK_BYTES and not line.endswith(b"\n"):
        raise DataError(f"{path}: the first line is longer than {_PEEK_BYTES} bytes; not a "
                        "CSV table of numbers")
    return line


def read_csv_table(path, dtype, *, columns: int | None = None, rows: int | None = None,
                   order: str = "C", cancel=None) -> np.ndarray:
    """Read a header-less comma-separated numeric table (gzip by name) as a 2-D array.

    Float values are read as the nearest float64 and cast to ``dtype`` (as ``np.loadtxt``).

    Args:
        path: a ``.csv`` or ``.csv.gz`` file; blank lines are skipped.
        dtype: ``np.int64``, ``np.float32`` or ``np.float64``. Float columns read ``nan`` (and
            pyarrow's other null spellings: empty, ``NA``, ``null``) as NaN; integer columns
            refuse them.
        columns: the expected number of columns (else taken from the first line).
        rows: expected number of rows, if known: the result is allocated once at that size
            (a wrong guess costs a copy, never a wrong result).
        order: ``"C"`` (rows contiguous, e.g. features) or ``"F"`` (columns contiguous, e.g. an
            ``[E, 2]`` edge list whose two columns are used as separate arrays).
        cancel: a ``threading.Event``; once set, the read stops at the next batch with
            :class:`gnnscale.data.background.Cancelled` (a loader reading this file in a
            background thread uses it when its other work fails).

    Raises:
        DataError: unreadable file, wrong column count, a value that is not a number.
    """
    import pyarrow as pa
    from isal.isal_zlib import error as IsalError

    path = Path(path)
    dtype = np.dtype(dtype)
    if dtype not in _DTYPES:
        raise TypeError(f"read_csv_table reads int64, float32 or float64, not {dtype}")
    line = first_line(path)
    found = line.count(b",") + 1 if line else 0
    if found == 0:
        return np.empty((0, columns or 0), dtype=dtype, order=order)
    if columns is not None and found != columns:
        raise DataError(f"{path} should have {columns} column(s), found {found}")
    try:
        return _read_compiled(path, dtype, found, rows, order, cancel)
    except TooManySlowValues:
        pass  # mostly spellings the float kernel leaves to Python: pyarrow reads them faster
    # A row must fit in one pyarrow block: start at 4x the first row, grow if a row is longer.
    block = max(BLOCK_BYTES, 4 * len(line))
    for attempt in range(4):
        try:
            return _read(path, dtype, found, rows, order, block, cancel)
        except pa.ArrowInvalid as exc:
            if "straddl" not in str(exc) or attempt == 3:
                raise DataError(f"{path} is not a readable numeric CSV table: "
                                f"{_describe(exc)}") from None
            block *= 16
        except (pa.ArrowException, OSError, EOFError, zlib.error, IsalError) as exc:
            raise DataError(f"{path} is not a readable numeric CSV table: "
                            f"{_describe(exc)}") from None
    raise AssertionError("unreachable")  # pragma: no cover


def _read(path: Path, dtype, num_columns: int, rows, order: str, block: int, cancel):
    """pyarrow's streaming reader, for float tables the compiled parser gives up on: values
    are read as float64 and cast to ``dtype``, as the compiled parser does."""
    import pyarrow as pa
    from pyarrow import csv

    names = [f"c{j}" for j in range(num_columns)]
    read = csv.ReadOptions(column_names=names, block_size=block)
    convert = csv.ConvertOptions(column_types={n: pa.float64() for n in names})
    table = _Filling(num_columns, dtype, order, rows)
    with _decompressed(path) as source:
        reader = csv.open_csv(source, read_options=read, convert_options=convert,
                              parse_options=csv.ParseOptions(quote_char=False))
        for batch in reader:
            stop_if_cancelled(cancel, path)
            table.add(batch)
    return table.result()


def _read_compiled(path: Path, dtype, columns: int, rows, order: str, cancel) -> np.ndarray:
    """The compiled parser of :mod:`gnnscale.data.numeric_csv`."""
    from isal.isal_zlib import error as IsalError

    def bad(message):
        return DataError(f"{path} is not a readable numeric CSV table: {message}")

    try:
        with _decompressed(path, as_stream=True) as source:
            return parse_numeric_table(source, dtype, columns, rows, order, bad,
                                       lambda: stop_if_cancelled(cancel, path))
    except (OSError, EOFError, zlib.error, IsalError) as exc:
        raise bad(_describe(exc)) from None


@contextlib.contextmanager
def _decompressed(path: Path, as_stream: bool = False):
    """What the parser reads: a ``.gz`` file through ISA-L's gzip in a background thread
    (faster than zlib, and it overlaps the parsing), anything else by its path (pyarrow) or as
    an open binary file (``as_stream``)."""
    if not path.name.endswith(".gz"):
        if not as_stream:
            yield path
            return
        with open(path, "rb") as handle:
            yield handle
        return
    from isal import igzip_threaded

    with igzip_threaded.open(path, "rb", threads=1, block_size=8 << 20) as handle:
        yield handle


def _describe(exc: Exception) -> str:
    """pyarrow's message, on one line and with the quoted value or row cut to a readable size."""
    text = " ".join(str(exc).split())
    if len(text) > 160:
        text = text[:160] + "..."
    return text or type(exc).__name__


class _Filling:
    """The result array, filled batch by batch; rows past the expected count go to extra blocks."""

    def __init__(self, num_columns: int, dtype, order: str, rows: int | None):
        self.num_columns, self.dtype, self.order = num_columns, dtype, order
        self.first = np.empty((max(int(rows or 0), 0), num_columns), dtype=dtype, order=order)
        self.filled = 0
        self.extra: list[np.ndarray] = []

    def add(self, batch) -> None:
        room = self.first.shape[0] - self.filled
        head = min(room, batch.num_rows)
        if head:
            self._copy(batch.slice(0, head), self.first[self.filled:self.filled + head])
            self.filled += head
        if batch.num_rows > head:
            rest = batch.slice(head)
            block = np.empty((rest.num_rows, self.num_columns), dtype=self.dtype,
                             order=self.order)
            self._copy(rest, block)
            self.extra.append(block)

    def _copy(self, batch, target: np.ndarray) -> None:
        if self.order == "C" and self.num_columns > 1:
            # Transpose one batch at a time (it fits in cache): columns -> contiguous rows.
            stacked = np.empty((self.num_columns, batch.num_rows), dtype=self.dtype)
            for j, column in enumerate(batch.columns):
                stacked[j] = column.to_numpy(zero_copy_only=False)
            target[...] = stacked.T
        else:
            for j, column in enumerate(batch.columns):
                target[:, j] = column.to_numpy(zero_copy_only=False)

    def result(self) -> np.ndarray:
        head = self.first[:self.filled]
        if not self.extra:
            return head
        total = self.filled + sum(block.shape[0] for block in self.extra)
        out = np.empty((total, self.num_columns), dtype=self.dtype, order=self.order)
        start = 0
        for part in [head, *self.extra]:
            out[start:start + part.shape[0]] = part
            start += part.shape[0]
        return out
