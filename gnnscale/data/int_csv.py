"""The compiled kernel for header-less CSV tables of integers (edge lists, node-id lists).

OGB's ``edge.csv.gz`` of a products-sized graph is 64M lines of ``src,dst``, more than
pyarrow's streaming CSV reader converts quickly on one core (docs/large-graphs.md,
"Ingestion"). :func:`parse_ints` converts a
window of text with one compiled pass (digits, an optional sign, blanks around a value;
``\\r\\n`` line ends; blank lines skipped) straight into the int64 result, without the GIL;
:func:`gnnscale.data.numeric_csv.parse_numeric_table` feeds it the windows.
"""

from __future__ import annotations

import numba
import numpy as np

# Status codes of the kernels (shared with gnnscale.data.float_csv).
OK, FULL, BAD_VALUE, BAD_COLUMNS, SLOW_FULL = 0, 1, 2, 3, 4
_INT64_MAX = np.iinfo(np.int64).max
_TENTH, _LAST_DIGIT = _INT64_MAX // 10, _INT64_MAX % 10


@numba.njit(cache=True, nogil=True)
def is_blank(c):
    """Space, tab or carriage return."""
    return c == 32 or c == 9 or c == 13


@numba.njit(cache=True, nogil=True)
def skip_blank_line(buf, pos, end):  # pragma: no cover - compiled
    """Where the line at ``pos`` ends (one past its ``\\n``) when it holds only blanks, else -1."""
    probe = pos
    while probe < end and is_blank(buf[probe]):
        probe += 1
    if probe >= end or buf[probe] == 10:
        return probe + 1
    return -1


@numba.njit(cache=True, nogil=True)
def field_end(buf, start, end):  # pragma: no cover - compiled
    """End of the field starting at ``start`` (at its ``,`` or ``\\n``), trailing blanks off."""
    stop = start
    while stop < end and buf[stop] != 44 and buf[stop] != 10:
        stop += 1
    while stop > start and is_blank(buf[stop - 1]):
        stop -= 1
    return stop


@numba.njit(cache=True, nogil=True)
def parse_ints(buf, end, out, row, columns, slow):  # pragma: no cover - compiled
    """Parse complete lines of ``buf[:end]`` into ``out[row:]`` (``slow`` is unused: integers
    have no values for Python to finish).

    Returns ``(status, position, row, lines, a, b, 0)``: ``position`` is where parsing stopped
    (the start of the line not stored when ``out`` is full, or of the bad line), ``row`` the
    next free row, ``lines`` the line breaks passed; for a bad value ``a:b`` is its span, for a
    bad row ``a`` is its field count.
    """
    capacity = out.shape[0]
    pos = 0
    lines = 0
    while pos < end:
        line_start = pos
        after_blank = skip_blank_line(buf, pos, end)
        if after_blank >= 0:
            pos = after_blank
            lines += 1
            continue
        if row >= capacity:
            return FULL, line_start, row, lines, 0, 0, 0
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
            while pos < end and is_blank(buf[pos]):
                pos += 1
            at_end = pos >= end or buf[pos] == 10 or buf[pos] == 44
            if digits == 0 or overflow or not at_end:
                return (BAD_VALUE, line_start, row, lines, value_start,
                        field_end(buf, value_start, end), 0)
            if field < columns:
                out[row, field] = -value if negative else value
            field += 1
            if pos < end and buf[pos] == 44:  # ',': another field follows
                pos += 1
                continue
            break
        if field != columns:
            return BAD_COLUMNS, line_start, row, lines, field, 0, 0
        row += 1
        pos += 1  # past '\n' (or the end of the last, unterminated line)
        lines += 1
    return OK, end, row, lines, 0, 0, 0


@numba.njit(cache=True, nogil=True)
def after_last_newline(buf, lo, hi):  # pragma: no cover - compiled
    """One past the last ``\\n`` in ``buf[lo:hi]``, or 0 when there is none."""
    for i in range(hi - 1, lo - 1, -1):
        if buf[i] == 10:
            return i + 1
    return 0
