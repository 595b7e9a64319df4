"""The pyarrow CSV path (csv_table) and the streaming npz reader (npz_stream) against numpy."""

import gzip

import numpy as np
import pytest

from gnnscale.data import csv_table
from gnnscale.data.csv_table import read_csv_table
from gnnscale.data.npz_stream import npz_array_header, read_npz_array
from gnnscale.errors import DataError


@pytest.fixture
def small_blocks(monkeypatch):
    """pyarrow blocks of 64 bytes: every table spans many batches."""
    monkeypatch.setattr(csv_table, "BLOCK_BYTES", 64)


def _write(path, text: str):
    data = text.encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz"])
@pytest.mark.parametrize("rows_hint", [None, 0, 5, 37, 1000])
@pytest.mark.parametrize("order", ["C", "F"])
def test_matches_loadtxt_across_batches_and_row_hints(tmp_path, small_blocks, suffix,
                                                      rows_hint, order):
    rng = np.random.default_rng(1)
    values = rng.standard_normal((37, 4)).astype(np.float32)
    text = "\n".join(",".join(repr(float(v)) for v in row) for row in values) + "\n\n"
    path = _write(tmp_path / f"feat{suffix}", text)
    got = read_csv_table(path, np.float32, rows=rows_hint, order=order)
    assert got.dtype == np.float32 and got.shape == (37, 4)
    assert np.array_equal(got, np.loadtxt(path, dtype=np.float32, delimiter=",", ndmin=2))
    assert got[:, 0].flags.c_contiguous == (order == "F") or got.flags.c_contiguous
    ids = rng.integers(0, 2**40, size=(50, 2))
    path = _write(tmp_path / f"edge{suffix}", "".join(f"{a},{b}\n" for a, b in ids))
    got = read_csv_table(path, np.int64, columns=2, rows=rows_hint, order=order)
    assert got.dtype == np.int64 and np.array_equal(got, ids)


def test_nan_labels_empty_files_and_blank_lines(tmp_path):
    labels = read_csv_table(_write(tmp_path / "l.csv", "3\nnan\n\n0\n"), np.float64)
    assert np.array_equal(labels[:, 0], [3, np.nan, 0], equal_nan=True)
    assert read_csv_table(_write(tmp_path / "e.csv.gz", ""), np.int64, columns=1).shape == (0, 1)
    assert read_csv_table(_write(tmp_path / "b.csv", "\n\n"), np.int64).shape == (0, 0)


@pytest.mark.parametrize("text, dtype, message", [
    ("1,2\n3,4,5\n", np.int64, r"edge.csv.gz is not a readable .*Expected 2 columns, got 3"),
    ("1,2\n3\n", np.int64, "Expected 2 columns, got 1: 3"),
    ("1,2\n3,x7\n", np.int64, "invalid value 'x7'"),
    ("1,2\n3,1.5\n", np.int64, "invalid value '1.5'"),
    ("1,2\n3,\n", np.int64, "invalid value ''"),
    ("1,2\n99999999999999999999999,1\n", np.int64, "invalid value '99999999999999999999999'"),
    ("0.5,abc\n", np.float32, "invalid value 'abc'"),
])
def test_malformed_tables_name_the_file_and_value(tmp_path, small_blocks, text, dtype, message):
    # 40 good rows first: the bad one sits in a later batch than the first.
    path = _write(tmp_path / "edge.csv.gz", "".join(f"{i},{i}\n" for i in range(40)) + text)
    with pytest.raises(DataError, match=message) as error:
        read_csv_table(path, dtype, columns=2 if dtype == np.int64 else None)
    assert "\n" not in str(error.value)


def test_damaged_gzip_wrong_width_and_long_rows_are_one_line_errors(tmp_path):
    with pytest.raises(DataError, match="w.csv should have 2 column.*found 3"):
        read_csv_table(_write(tmp_path / "w.csv", "1,2,3\n"), np.int64, columns=2)
    good = gzip.compress(b"1,2\n" * 10000)
    (tmp_path / "cut.csv.gz").write_bytes(good[:len(good) // 2])
    with pytest.raises(DataError, match="cut.csv.gz"):
        read_csv_table(tmp_path / "cut.csv.gz", np.int64, columns=2)
    (tmp_path / "junk.csv.gz").write_bytes(b"\x1f\x8b" + bytes(range(200)))
    with pytest.raises(DataError, match="junk.csv.gz"):
        read_csv_table(tmp_path / "junk.csv.gz", np.int64)
    long_row = ",".join(["1"] * 500) + "\n" + ",".join(["x"] * 500) + "\n"
    with pytest.raises(DataError, match=r"invalid value 'x'") as error:
        read_csv_table(_write(tmp_path / "wide.csv", long_row), np.float32)
    assert len(str(error.value)) < 400


@pytest.mark.parametrize("stored, wanted", [(np.float16, np.float32), (np.float32, None),
                                            (np.int32, np.int64), (np.int64, np.int64)])
@pytest.mark.parametrize("fortran", [False, True])
def test_npz_stream_matches_np_load(tmp_path, stored, wanted, fortran):
    values = (np.random.default_rng(0).standard_normal((33, 7)) * 100).astype(stored)
    if fortran:
        values = np.asfortranarray(values)
    np.savez_compressed(tmp_path / "a.npz", m=values, other=np.arange(3))
    assert npz_array_header(tmp_path / "a.npz", "m") == ((33, 7), np.dtype(stored))
    got = read_npz_array(tmp_path / "a.npz", "m", wanted, chunk_bytes=40)
    assert got.dtype == np.dtype(wanted or stored)
    assert np.array_equal(got, values.astype(wanted or stored))


def test_npz_stream_refuses_objects_missing_keys_and_truncation(tmp_path):
    np.savez(tmp_path / "o.npz", s=np.array(["a", "b"]), big=np.arange(10**5))
    with pytest.raises(DataError, match="'s' has dtype <U1; numbers are expected"):
        read_npz_array(tmp_path / "o.npz", "s")
    with pytest.raises(DataError, match=r"no array 'q' \(it has: s, big\)"):
        read_npz_array(tmp_path / "o.npz", "q")
    data = bytearray((tmp_path / "o.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside big's stored (uncompressed) data
    (tmp_path / "bad.npz").write_bytes(bytes(data))
    with pytest.raises(DataError, match="'big' is unreadable.*(CRC|Bad)"):
        read_npz_array(tmp_path / "bad.npz", "big")


def test_a_row_longer_than_a_block_is_read(tmp_path, small_blocks):
    long_value = "1." + "0" * 600
    path = _write(tmp_path / "f.csv.gz", "1,2\n" * 30 + f"{long_value},3\n" + "4,5\n" * 30)
    got = read_csv_table(path, np.float32)
    assert got.shape == (61, 2) and got[30].tolist() == [1.0, 3.0]


@pytest.mark.parametrize("window", [16, 37, 1 << 20])
@pytest.mark.parametrize("rows_hint", [None, 3, 2000])
def test_integer_tables_across_windows_line_ends_and_blanks(tmp_path, monkeypatch, window,
                                                            rows_hint):
    from gnnscale.data import numeric_csv

    monkeypatch.setattr(numeric_csv, "WINDOW_BYTES", window)
    rng = np.random.default_rng(3)
    ids = rng.integers(-2**62, 2**62, size=(1500, 3))
    ids[:5] = [[0, 0, 0], [9223372036854775807, -1, 1], [7, 8, 9], [1, 2, 3], [-5, 5, 0]]
    lines = []
    for i, (a, b, c) in enumerate(ids):
        text = [f"{a},{b},{c}", f" {a} ,\t{b},+{c}" if c >= 0 else f"{a}, {b},{c} ",
                f"{a},{b},{c}\r"][i % 3]
        lines.append(text)
        if i % 97 == 0:
            lines.append("   ")  # blank lines are skipped
    text = "\n".join(lines)  # no line end after the last row
    for suffix in (".csv", ".csv.gz"):
        path = _write(tmp_path / f"ids{suffix}", text)
        for order in ("C", "F"):
            got = read_csv_table(path, np.int64, rows=rows_hint, order=order)
            assert got.dtype == np.int64 and np.array_equal(got, ids), (suffix, order)
            assert got.flags.c_contiguous if order == "C" else got.flags.f_contiguous


@pytest.mark.parametrize("text, dtype, message", [
    ("1,2\n3,4\n5,-\n", np.int64, "line 3: invalid value '-' for int64"),
    ("1,2\n\n3,4 5\n", np.int64, "line 3: invalid value '4 5'"),
    ("1,2\n3,4,5\n", np.int64, "line 2: Expected 2 columns, got 3: 3,4,5"),
    ("1,2\n3,0x10\n", np.int64, "line 2: invalid value '0x10'"),
    ("1,2\n-9223372036854775809,1\n", np.int64, "line 2: invalid value '-9223372036854775809'"),
    ("1,2\n3,abc\n", np.float32, "line 2: invalid value 'abc' for float32"),
    ("1,2\n\n3,1_0\n", np.float32, "line 3: invalid value '1_0' for float32"),
    ("1,2\n3,0x10\n", np.float64, "line 2: invalid value '0x10' for float64"),
    ("1,2\n3,1e\n", np.float32, "line 2: invalid value '1e'"),
    ("1,2\n3,1.5.3\n", np.float32, "line 2: invalid value '1.5.3'"),
    ("1,2\n3,- 1\n", np.float32, "line 2: invalid value '- 1'"),
    ("1,2\n3,4,5\n", np.float32, "line 2: Expected 2 columns, got 3: 3,4,5"),
    ("1,2\n3\n", np.float32, "line 2: Expected 2 columns, got 1: 3"),
])
def test_errors_name_the_line_and_value(tmp_path, monkeypatch, text, dtype, message):
    from gnnscale.data import numeric_csv

    monkeypatch.setattr(numeric_csv, "WINDOW_BYTES", 8)  # the bad line sits in a later window
    path = _write(tmp_path / "e.csv", text)
    with pytest.raises(DataError, match=f"e.csv is not a readable numeric CSV table: {message}"):
        read_csv_table(path, dtype, columns=2)


def _float_spellings(rng, count):
    """Decimal spellings of floats in the formats people write, and what each must read as
    (Python's correctly rounded ``float``; pyarrow's null spellings as NaN)."""
    values = (rng.standard_normal(count) * 10.0 ** rng.integers(-30, 30, count)).tolist()
    formats = [lambda v: repr(float(np.float32(v))), repr, "{:.6f}".format, "{:g}".format,
               "{:e}".format, "{:.18e}".format, "{:.3E}".format, lambda v: f"+{abs(v):.4f}",
               lambda v: f"{v:.5f}".replace("0.", ".", 1), lambda v: f"000{abs(v):.2f}",
               lambda v: f"{round(v)}.", lambda v: f" {v:.3g}\t"]
    texts = [formats[i % len(formats)](v) for i, v in enumerate(values)]
    texts[:12] = ["nan", "NA", "", "-inf", "Infinity", "-0", "1e-400", "1e400", "0e999",
                  "4.9406564584124654e-324", "123456789012345678901234567890", "0.1e+2"]
    expected = [float(t) if t.strip() not in ("nan", "NA", "") else np.nan for t in texts]
    return texts, np.array(expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("window", [23, 1 << 20])
def test_float_tables_read_the_nearest_float64_cast_to_the_dtype(tmp_path, monkeypatch, dtype,
                                                                 window):
    from gnnscale.data import numeric_csv

    monkeypatch.setattr(numeric_csv, "WINDOW_BYTES", window)
    texts, expected = _float_spellings(np.random.default_rng(5), 3000)
    lines = [",".join(texts[i:i + 3]) for i in range(0, len(texts), 3)]
    lines[7] += "\r"
    lines.insert(40, "  ")  # a blank line is skipped
    path = _write(tmp_path / "f.csv.gz", "\n".join(lines))  # no line end after the last row
    got = read_csv_table(path, dtype)
    want = expected.reshape(-1, 3).astype(dtype)
    assert got.dtype == dtype and got.shape == want.shape
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))  # "-0" is -0.0


def test_float_tables_full_of_slow_spellings_are_read_by_pyarrow_alike(tmp_path, monkeypatch):
    """Past the slow-value allowance the table is read again by pyarrow, to the same values."""
    from gnnscale.data import csv_table, numeric_csv

    values = np.random.default_rng(6).standard_normal((400, 5))
    path = tmp_path / "long.csv"
    np.savetxt(path, values, delimiter=",")  # "%.18e": 19 digits, all slow
    fast = read_csv_table(path, np.float64)
    monkeypatch.setattr(numeric_csv, "SLOW_VALUES_ALLOWED", 10)
    used = []
    real = csv_table._read
    monkeypatch.setattr(csv_table, "_read", lambda *a, **k: used.append(1) or real(*a, **k))
    again = read_csv_table(path, np.float64)
    assert used and np.array_equal(fast, again) and np.array_equal(fast, values)


