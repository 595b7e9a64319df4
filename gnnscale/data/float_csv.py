"""The compiled kernel for header-less CSV tables of floats (node features, labels).

A products-sized ``node-feat.csv.gz`` holds 2.3 GB of text (2.1M rows of 100 floats);
:func:`parse_floats` converts the common spellings of a decimal number in one compiled pass,
several times faster than pyarrow's streaming CSV reader (docs/large-graphs.md, "Ingestion").

A value is read as the float64 nearest to the decimal text, then cast to the table's dtype
(what ``np.loadtxt`` does). The kernel computes it exactly when the digits fit the fast path
of Clinger's algorithm: at most 17 significant digits forming an integer ``m <= 2**53`` and a
decimal exponent ``e`` with ``|e| <= 22``, where ``m * 10**e`` (or ``m / 10**-e``) is one
correctly rounded float64 operation on exact operands. That covers float32's shortest
spellings (9 digits), ``%.6f`` and ``%g`` output. Any other field (``nan``, ``NA``, an empty
field, ``inf``, 18+ digits, a huge exponent, or text that is not a number) is recorded as a
*slow* value with its place; :func:`slow_value` gives it pyarrow's meaning (its null spellings
read as NaN, ``inf``/``infinity`` in any case, other decimals through Python's correctly
rounded ``float``) or refuses it. Tables where slow values are common (e.g. ``np.savetxt``'s
``%.18e`` output) are better read by pyarrow; :func:`gnnscale.data.numeric_csv.parse_numeric_table`
gives up on the kernel once they exceed :data:`SLOW_VALUES_ALLOWED`.
"""

from __future__ import annotations

import functools
import math
import re

import numba
import numpy as np

from gnnscale.data.int_csv import BAD_COLUMNS, FULL, OK, SLOW_FULL, field_end, is_blank, \
    skip_blank_line

_POW10 = np.array([10.0 ** k for k in range(23)], dtype=np.float64)  # all exact in float64
_MAX_EXACT = 2 ** 53
_MAX_DIGITS = 17  # mantissa digits accumulated (10**17 - 1 < 2**63)
# Slow values tolerated before the table is handed to pyarrow: this many, plus 1% of the values.
SLOW_VALUES_ALLOWED = 10_000

_DECIMAL = re.compile(rb"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_INFINITY = re.compile(rb"[+-]?inf(inity)?", re.IGNORECASE)


@functools.cache
def _null_spellings() -> frozenset:
    from pyarrow import csv

    return frozenset(s.encode() for s in csv.ConvertOptions().null_values)


def slow_value(text: bytes) -> float | None:
    """The value of a field the kernel left to Python, as pyarrow reads it; None if it is not a
    number (``text`` has no surrounding blanks)."""
    if text in _null_spellings():
        return math.nan
    if _DECIMAL.fullmatch(text) or _INFINITY.fullmatch(text):
        return float(text)
    return None


@numba.njit(cache=True, nogil=True)
def _digit(c):
    """The digit ``c`` stands for, or a value above 9 (as unsigned) when it is not one."""
    return np.uint64(np.int64(c) - 48)


@numba.njit(cache=True, nogil=True)
def _read_digits(buf, pos, mantissa, counted, exponent, dropped, fraction):  # pragma: no cover
    """The digits from ``pos`` on, appended to ``mantissa`` (``counted`` digits so far, at most
    17: it stays below 2**63) with the decimal ``exponent`` adjusted; ``dropped`` collects the
    nonzero digits past those (then the value is not exact). Returns the five updated."""
    d = _digit(buf[pos])
    while d <= 9:
        if counted < _MAX_DIGITS:
            mantissa = mantissa * 10 + np.int64(d)
            counted += 1
            if fraction:
                exponent -= 1
        else:
            if not fraction:
                exponent += 1
            dropped |= d
        pos += 1
        d = _digit(buf[pos])
    return pos, mantissa, counted, exponent, dropped


@numba.njit(cache=True, nogil=True)
def parse_floats(buf, end, out, row, columns, slow):  # pragma: no cover - compiled
    """Parse the lines of ``buf[:end]`` into ``out[row:]`` (float32 or float64);
    ``buf[end - 1]`` must be ``\\n`` (it stops every scan, so the loops need no bounds test).

    Fields outside the fast path are recorded in ``slow`` (rows of ``row, field, start, stop,
    lines before it``; their cell is left for the caller). Returns ``(status, position, row,
    lines, a, b, slow count)``: ``position`` is where parsing stopped (the start of the line
    not stored when ``out`` or ``slow`` is full, or of a row with another field count, whose
    count is ``a``), ``row`` the next free row, ``lines`` the line breaks passed.
    """
    capacity = out.shape[0]
    room = slow.shape[0]
    recorded = 0
    pos = 0
    lines = 0
    while pos < end:
        line_start = pos
        if buf[pos] == 10 or is_blank(buf[pos]):
            after_blank = skip_blank_line(buf, pos, end)
            if after_blank >= 0:
                pos = after_blank
                lines += 1
                continue
        if row >= capacity:
            return FULL, line_start, row, lines, 0, 0, recorded
        if recorded + columns > room:
            return SLOW_FULL, line_start, row, lines, 0, 0, recorded
        field = 0
        while True:
            c = buf[pos]
            while c == 32 or c == 9:
                pos += 1
                c = buf[pos]
            value_start = pos
            negative = c == 45
            if c == 45 or c == 43:  # '-' or '+'
                pos += 1
            first = pos
            pos, mantissa, counted, exponent, dropped = _read_digits(buf, pos, 0, 0, 0, 0, False)
            digits = pos - first
            if buf[pos] == 46:  # '.'
                first = pos + 1
                pos, mantissa, counted, exponent, dropped = _read_digits(
                    buf, first, mantissa, counted, exponent, dropped, True)
                digits += pos - first
            if digits and (buf[pos] == 101 or buf[pos] == 69):  # 'e' or 'E'
                pos += 1
                exponent_negative = buf[pos] == 45
                if buf[pos] == 45 or buf[pos] == 43:
                    pos += 1
                first = pos
                shift = 0
                d = _digit(buf[pos])
                while d <= 9:
                    if shift < 100000:
                        shift = shift * 10 + np.int64(d)
                    pos += 1
                    d = _digit(buf[pos])
                if pos == first:
                    dropped = 1  # 'e' without digits: not a number
                exponent += -shift if exponent_negative else shift
            while is_blank(buf[pos]):
                pos += 1
            c = buf[pos]
            fast = digits > 0 and dropped == 0 and (c == 10 or c == 44) \
                and mantissa <= _MAX_EXACT
            value = 0.0
            if fast and mantissa:
                if 0 <= exponent <= 22:
                    value = np.float64(mantissa) * _POW10[exponent]
                elif -22 <= exponent < 0:
                    value = np.float64(mantissa) / _POW10[-exponent]
                else:
                    fast = False
            if not fast:
                stop = field_end(buf, value_start, end)
                pos = stop
                while buf[pos] != 44 and buf[pos] != 10:
                    pos += 1
                if field < columns:
                    slow[recorded, 0] = row
                    slow[recorded, 1] = field
                    slow[recorded, 2] = value_start
                    slow[recorded, 3] = stop
                    slow[recorded, 4] = lines
                    recorded += 1
            elif field < columns:
                out[row, field] = -value if negative else value
            field += 1
            if buf[pos] == 44:  # ',': another field follows
                pos += 1
                continue
            break
        if field != columns:
            return BAD_COLUMNS, line_start, row, lines, field, 0, recorded
        row += 1
        pos += 1  # past '\n'
        lines += 1
    return OK, end, row, lines, 0, 0, recorded
