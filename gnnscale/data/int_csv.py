"""A compiled parser for header-less CSV tables of integers (edge lists, node-id lists).

OGB's ``edge.csv.gz`` of a products-sized graph is 64M lines of ``src,dst``. pyarrow's streaming
CSV reader converts them at about 135 MB/s of text on one core; integers need none of its
generality, so :func:`parse_int_table` reads the inflated text in 16 MiB windows and converts
each with one compiled pass (digits, an optional sign, blanks around a value; ``\\r\\n`` line
ends; blank lines skipped) straight into the preallocated int64 result, releasing the GIL while
it runs (the OGB reader parses the feature table in another thread meanwhile). A value that is
not an integer, one beyond int64, or a row with another column count is a one-line error with
the line number and the offending text.
"""

from __future__ import annotations

import numba
import numpy as np

WINDOW_BYTES = 16 << 20
_SHOWN = 80  # characters of a bad value or row quoted in an error

# Status codes of the kernel.
_OK, _FULL, _BAD_VALUE, _BAD_COLUMNS = 0, 1, 2, 3
_INT64_MAX = np.iinfo(np.int64).max
_TENTH, _LAST_DIGIT = _INT64_MAX // 10, _INT64_MAX % 10


@numba.njit(cache=True, nogil=True)
def _is_blank(c):
    return c == 32 or c == 9 or c == 13  # space, tab, carriage return


@numba.njit(cache=True, nogil=True)
def _parse(buf, end, out, row, columns):  # pragma: no cover - compiled
    """Parse complete lines of ``buf[:end]`` into ``out[row:]``.

    Returns ``(status, position, row, lines, a, b)``: ``position`` is where parsing stopped
    (the start of the line not stored when ``out`` is full, or of the bad line), ``row`` the
    next free row, ``lines`` the line breaks passed; for a bad value ``a:b`` is its span, for a
    bad row ``a`` is its field count.
    """
    capacity = out.shape[0]
    pos = 0
    lines = 0
    while pos < end:
        line_start = pos
        # A blank line (only spaces, tabs, CR) is skipped.
        probe = pos
        while probe < end and _is_blank(buf[probe]):
            probe += 1
        if probe >= end or buf[probe] == 10:
            pos = probe + 1
            lines += 1
            continue
        if row >= capacity:
            return _FULL, line_start, row, lines, 0, 0
        field = 0
        while True:
            while pos < end and (buf[pos] == 32 or buf[pos] == 9):
                pos += 1
            value_start = pos
            negative = False
            if pos < end and (buf[pos] == 45 or buf[pos] == 43):  # '-' or '+'
                negative = buf[pos] == 45
                pos += 1
            digits = 0
            value = 0
            overflow = False
            while pos < end and 48 <= buf[pos] <= 57:
                d = np.int64(buf[pos]) - 48
                # value * 10 + d stays within int64 (no division in the loop)
                if value > _TENTH or (value == _TENTH and d > _LAST_DIGIT):
                    overflow = True
                else:
                    value = value * 10 + d
                digits += 1
                pos += 1
            value_end = pos
            while pos < end and _is_blank(buf[pos]):
                pos += 1
            at_end = pos >= end or buf[pos] == 10 or buf[pos] == 44
            if digits == 0 or overflow or not at_end:
                stop = value_end
                while stop < end and buf[stop] != 44 and buf[stop] != 10:
                    stop += 1
                while stop > value_start and _is_blank(buf[stop - 1]):
                    stop -= 1
                return _BAD_VALUE, line_start, row, lines, value_start, stop
            if field < columns:
                out[row, field] = -value if negative else value
            field += 1
            if pos < end and buf[pos] == 44:  # ',': another field follows
                pos += 1
                continue
            break
        if field != columns:
            return _BAD_COLUMNS, line_start, row, lines, field, 0
        row += 1
        pos += 1  # past '\n' (or the end of the last, unterminated line)
        lines += 1
    return _OK, end, row, lines, 0, 0


@numba.njit(cache=True, nogil=True)
def _after_last_newline(buf, lo, hi):  # pragma: no cover - compiled
    """One past the last ``\n`` in ``buf[lo:hi]``, or 0 when there is none."""
    for i in range(hi - 1, lo - 1, -1):
        if buf[i] == 10:
            return i + 1
    return 0


def parse_int_table(source, columns: int, rows: int | None, order: str, describe_error,
                    between_windows=None) -> np.ndarray:
    """Read the binary stream ``source`` (inflated text) as an int64 ``[rows, columns]`` table.

    Args:
        source: has ``readinto`` (a file, or a gzip stream).
        rows: expected row count (one allocation when right; else the table grows).
        order: ``"C"`` or ``"F"`` layout of the result.
        describe_error: ``describe_error(message)`` is the exception raised for a bad value
            or row (the caller names its file).
        between_windows: called before each window is read (e.g. to stop a cancelled read).
    """
    out = np.empty((max(int(rows or 0), 1024), columns), dtype=np.int64, order=order)
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
        # Parse up to the last complete line (everything, at the end of the stream).
        end = filled if eof else _after_last_newline(buf, held, filled)
        start = 0
        while start < end:
            status, stopped, row, lines, a, b = _parse(buf[start:end], end - start, out, row,
                                                       columns)
            line_number += lines
            if status == _FULL:
                grown = np.empty((2 * out.shape[0], columns), dtype=np.int64, order=order)
                grown[:row] = out[:row]
                out = grown
            elif status == _BAD_VALUE:
                text = bytes(buf[start + a:start + b]).decode("utf-8", "replace")
                raise describe_error(f"line {line_number}: invalid value "
                                     f"'{_cut(text)}' for int64")
            elif status == _BAD_COLUMNS:
                line = bytes(buf[start + stopped:end]).split(b"\n", 1)[0]
                text = line.decode("utf-8", "replace").strip()
                raise describe_error(f"line {line_number}: Expected {columns} columns, "
                                     f"got {a}: {_cut(text)}")
            start += stopped
        held = filled - end
        buf[:held] = buf[end:filled]
    if row == out.shape[0]:
        return out
    return np.array(out[:row], order=order)


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."
