"""Compiled parsing of header-less numeric CSV tables, window by window.

:func:`parse_numeric_table` reads the inflated text in 16 MiB windows and converts each with one
compiled pass straight into the preallocated result (int64 ids by
:func:`gnnscale.data.int_csv.parse_ints`, float32/float64 values by
:func:`gnnscale.data.float_csv.parse_floats`), releasing the GIL while it runs (the OGB reader
parses the feature table in another thread meanwhile). A value that is not a number of the
asked type, one beyond int64, or a row with another column count is a one-line error with the
line number and the offending text.
"""

from __future__ import annotations

import numpy as np

from gnnscale.data.float_csv import SLOW_VALUES_ALLOWED, parse_floats, slow_value
from gnnscale.data.int_csv import BAD_COLUMNS, BAD_VALUE, FULL, SLOW_FULL, after_last_newline, \
    parse_ints

WINDOW_BYTES = 16 << 20
_SLOW_ROWS = 4096  # slow float fields recorded per kernel call (at least 2 rows' worth)
_SHOWN = 80  # characters of a bad value or row quoted in an error


class TooManySlowValues(Exception):
    """The float table has more values outside the kernel's fast path than
    :data:`gnnscale.data.float_csv.SLOW_VALUES_ALLOWED` plus 1%: read it another way."""


def parse_numeric_table(source, dtype, columns: int, rows: int | None, order: str,
                        describe_error, between_windows=None) -> np.ndarray:
    """Read the binary stream ``source`` (inflated text) as a ``[rows, columns]`` table.

    Args:
        source: has ``readinto`` (a file, or a gzip stream).
        dtype: ``np.int64``, ``np.float32`` or ``np.float64``.
        rows: expected row count (one allocation when right; else the table grows).
        order: ``"C"`` or ``"F"`` layout of the result.
        describe_error: ``describe_error(message)`` is the exception raised for a bad value
            or row (the caller names its file).
        between_windows: called before each window is read (e.g. to stop a cancelled read).

    Raises:
        TooManySlowValues: (floats only) the table is mostly spellings the kernel leaves to
            Python; nothing is returned, the caller reads the file again another way.
    """
    dtype = np.dtype(dtype)
    kernel = parse_ints if dtype.kind == "i" else parse_floats
    out = np.empty((max(int(rows or 0), 1024), columns), dtype=dtype, order=order)
    slow = np.empty((max(_SLOW_ROWS, 2 * columns), 5), dtype=np.int64)
    slow_seen = 0
    buf = np.empty(WINDOW_BYTES, dtype=np.uint8)
    held = 0  # bytes of an incomplete line carried to the front of buf
    row = 0
    line_number = 1
    eof = False
    while not eof:
        if between_windows is not None:
            between_windows()
        if held == buf.size:  # a line longer than the window: widen it
            wider = np.empty(2 * buf.size, dtype=np.uint8)
            wider[:held] = buf[:held]
            buf = wider
        got = source.readinto(memoryview(buf)[held:])
        eof = not got
        filled = held + (got or 0)
        if eof and filled and buf[filled - 1] != 10:  # the float kernel's scans stop at '\n'
            if filled == buf.size:
                buf = np.concatenate([buf, np.zeros(1, dtype=np.uint8)])
            buf[filled] = 10
            filled += 1
        # Parse up to the last complete line (everything, at the end of the stream).
        end = filled if eof else after_last_newline(buf, held, filled)
        start = 0
        while start < end:
            status, stopped, row, lines, a, b, recorded = kernel(buf[start:end], end - start,
                                                                 out, row, columns, slow)
            if recorded:
                _finish_slow(buf, start, slow[:recorded], out, line_number, dtype,
                             describe_error)
                slow_seen += recorded
                if slow_seen > SLOW_VALUES_ALLOWED + row * columns // 100:
                    raise TooManySlowValues(slow_seen)
            line_number += lines
            if status == FULL:
                grown = np.empty((2 * out.shape[0], columns), dtype=dtype, order=order)
                grown[:row] = out[:row]
                out = grown
            elif status == BAD_VALUE:
                text = bytes(buf[start + a:start + b]).decode("utf-8", "replace")
                raise describe_error(f"line {line_number}: invalid value "
                                     f"'{_cut(text)}' for {dtype}")
            elif status == BAD_COLUMNS:
                line = bytes(buf[start + stopped:end]).split(b"\n", 1)[0]
                text = line.decode("utf-8", "replace").strip()
                raise describe_error(f"line {line_number}: Expected {columns} columns, "
                                     f"got {a}: {_cut(text)}")
            assert status != SLOW_FULL or recorded, "no progress"
            start += stopped
        held = filled - end
        buf[:held] = buf[end:filled]
    if row == out.shape[0]:
        return out
    return np.array(out[:row], order=order)


def _finish_slow(buf, start, slow, out, line_number, dtype, describe_error) -> None:
    """Store the values the float kernel left to Python (or refuse the first bad one)."""
    for row, field, a, b, lines in slow.tolist():
        text = bytes(buf[start + a:start + b])
        value = slow_value(text)
        if value is None:
            shown = text.decode("utf-8", "replace")
            raise describe_error(f"line {line_number + lines}: invalid value "
                                 f"'{_cut(shown)}' for {dtype}")
        out[row, field] = value


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."
