"""STREAM parser on real outputs of the reference stream.c (5.10) and stream.f
(revision 5.6), recorded on this machine (tests/data/stream/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.errors import ParseError
from hpcval.parsers.stream import KERNELS, check_complete, parse_stream

DATA = Path(__file__).resolve().parents[1] / "data" / "stream"


def load(name: str) -> str:
    return (DATA / name).read_text()


def test_c_reference_output() -> None:
    result = check_complete(parse_stream(load("stream_c_5.10_10M_omp2.txt"), "c.txt"))
    assert (result.version, result.language) == ("5.10", "c")
    assert result.array_elements == 10_000_000 and result.array_bytes == 80_000_000
    assert (result.threads, result.ntimes) == (2, 10)
    assert list(result.kernels) == list(KERNELS)
    assert result.rate("Triad") == 31754.0
    copy = result.kernels["Copy"]
    assert (copy.best_rate_mb_s, copy.avg_time_s, copy.min_time_s, copy.max_time_s) == (
        28891.4, 0.006015, 0.005538, 0.006805)


def test_c_output_sized_from_the_cache() -> None:
    """Built with -DSTREAM_ARRAY_SIZE=16777216: 128 MiB per array, 4x the
    32 MiB last-level cache of the machine that recorded it."""
    result = check_complete(parse_stream(load("stream_c_5.10_16M_omp2.txt")))
    assert result.array_bytes == 4 * 32 * 1024 * 1024
    assert result.rate("triad") == 28375.9


def test_fortran_reference_output() -> None:
    result = check_complete(parse_stream(load("stream_f_5.6_20M_omp2.txt"), "f.txt"))
    assert (result.version, result.language) == ("5.6", "fortran")
    assert result.array_elements == 20_000_000 and result.bytes_per_element == 8
    assert result.threads == 2
    assert result.rate("Copy") == 28230.8 and result.rate("Triad") == 29518.7
    assert result.kernels["Add"].max_time_s == 0.021530


@pytest.mark.parametrize("name, marker, array", [
    ("stream_c_5.10_10M_omp2.txt", "Solution Validates: avg error less than 1.000000e-13 on "
     "all three arrays", "Failed Validation on array c[], AvgRelAbsErr > epsilon "
     "(1.000000e-13)"),
    ("stream_f_5.6_20M_omp2.txt", " Solution Validates!", " Failed Validation on array c()"),
])
def test_failed_validation_is_refused(name: str, marker: str, array: str) -> None:
    """STREAM's own failure line (the text stream.c/stream.f print) in place of
    the validation line of a real run."""
    text = load(name)
    assert marker in text
    result = parse_stream(text.replace(marker, array), "bad.txt")
    assert result.failures == [array.strip()]
    with pytest.raises(ParseError, match=r"bad.txt: STREAM's results failed its own validation: "
                                         r"Failed Validation on array c"):
        check_complete(result)


def test_cut_off_run() -> None:
    text = load("stream_c_5.10_10M_omp2.txt")
    head = text[: text.index("Add:")]
    with pytest.raises(ParseError, match="no Add, Triad row: the run was cut off"):
        check_complete(parse_stream(head, "cut.txt"))
    no_check = text[: text.index("Solution")]
    with pytest.raises(ParseError, match="ends before 'Solution Validates'"):
        check_complete(parse_stream(no_check, "cut.txt"))


def test_broken_rows_name_their_line() -> None:
    lines = load("stream_c_5.10_10M_omp2.txt").splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Scale:"))
    cut = lines[:]
    cut[at] = cut[at][:30]
    with pytest.raises(ParseError, match=rf"x:{at + 1}: STREAM Scale row has 2 values, 4 expected"):
        parse_stream("\n".join(cut), "x")
    bad = lines[:]
    bad[at] = bad[at].replace("32726.5", "32726.5e")
    with pytest.raises(ParseError, match=rf"x:{at + 1}: not a number in the STREAM Scale row"):
        parse_stream("\n".join(bad), "x")


def test_two_runs_in_one_file_are_not_merged() -> None:
    text = load("stream_c_5.10_10M_omp2.txt")
    with pytest.raises(ParseError, match="a second Copy row: two STREAM runs"):
        parse_stream(text + text, "two.txt")


@pytest.mark.parametrize("text", ["", "Segmentation fault\n", "Copy: 1 2 3 4\n"])
def test_not_stream_output(text: str) -> None:
    with pytest.raises(ParseError):
        parse_stream(text, "g.txt")


def test_a_rate_that_is_not_finite_is_refused() -> None:
    """A zero minimum time makes stream.c print an infinite rate: refused, not read."""
    lines = load("stream_c_5.10_10M_omp2.txt").splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Triad:"))
    rate = lines[at].split()[1]
    lines[at] = lines[at].replace(rate, "inf")
    with pytest.raises(ParseError, match=rf"x:{at + 1}: impossible value in the STREAM Triad row"):
        parse_stream("\n".join(lines), "x")
