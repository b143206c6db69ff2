"""STREAM parser on real outputs of the reference stream.c (5.10) and stream.f
(revision 5.6), recorded on this machine (tests/data/stream/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.core.errors import ParseError
from hpcval.parsers.stream import KERNELS, check_complete, parse_stream, parse_stream_runs

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
    with pytest.raises(ParseError, match=r"^two.txt: 2 STREAM runs in one output \(starting at "
                                         r"lines 1, 35\): read it with parse_stream_runs"):
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


# --- several runs in one output: thread-scaling logs, job outputs appended ---

SCALING = "stream_c_5.10_skylake8160_24-24-48threads.txt"


def test_thread_scaling_log_gives_every_run() -> None:
    """A real log of three runs on a 2-socket Xeon Platinum 8160 (24 threads
    bound to socket 0, 24 to socket 1, then 48): every run with its thread
    count and its own rates (tests/data/stream/README.md)."""
    runs = parse_stream_runs(load(SCALING), SCALING)
    assert [(r.line, r.threads) for r in runs] == [(1, 24), (35, 24), (68, 48)]
    assert all(check_complete(r) is r for r in runs)
    assert [r.rate("Triad") for r in runs] == [94102.0, 94216.5, 186950.1]
    assert [r.rate("Copy") for r in runs] == [84362.4, 83835.4, 168066.3]
    assert all((r.array_elements, r.ntimes, r.version) == (120_000_000, 20, "5.10")
               for r in runs)
    assert runs[2].source == f"{SCALING} (run 3 of 3, line 68)"
    with pytest.raises(ParseError, match=rf"^{SCALING}: 3 STREAM runs in one output \(starting "
                                         r"at lines 1, 35, 68\)"):
        parse_stream(load(SCALING), SCALING)


def test_one_run_is_one_run() -> None:
    for name in ("stream_c_5.10_10M_omp2.txt", "stream_f_5.6_20M_omp2.txt"):
        runs = parse_stream_runs(load(name), name)
        assert len(runs) == 1
        assert runs[0].kernels == parse_stream(load(name), name).kernels
        assert runs[0].source == name


def test_job_outputs_appended_over_several_jobs() -> None:
    """Outputs of the C and the Fortran program appended to one file (as a job
    script's ``>>`` does), built from two real outputs: the Fortran run's
    lines before its version line stay with it."""
    c, f = load("stream_c_5.10_10M_omp2.txt"), load("stream_f_5.6_20M_omp2.txt")
    runs = parse_stream_runs(c + f + c, "jobs.log")
    assert [(r.language, r.threads, r.array_elements) for r in runs] == [
        ("c", 2, 10_000_000), ("fortran", 2, 20_000_000), ("c", 2, 10_000_000)]
    assert runs[1].line == len(c.splitlines()) + 3  # its "Assuming 8 bytes per ..." line
    assert runs[1].rate("Triad") == 29518.7 and runs[2].rate("Triad") == 31754.0


def test_runs_without_version_lines_split_at_their_configuration() -> None:
    """Output filtered to its figures (no version line): a run starts at its
    first configuration line after the previous run's kernel rows."""
    keep = ("Array size", "Number of Threads counted", "Function", "Copy:", "Scale:",
            "Add:", "Triad:", "Solution Validates")
    runs = parse_stream_runs("\n".join(ln for ln in load(SCALING).splitlines()
                                       if ln.startswith(keep)), "f.log")
    assert [(r.threads, r.rate("Triad"), r.version) for r in runs] == [
        (24, 94102.0, None), (24, 94216.5, None), (48, 186950.1, None)]


def test_a_run_cut_by_the_next_is_its_own_and_refused() -> None:
    """A job killed during its run, then the next job's output: two runs; the
    first is incomplete and check_complete names it."""
    text = load(SCALING)
    lines = text.splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Add:"))
    cut = "".join(lines[:at]) + "".join(lines[34:])
    runs = parse_stream_runs(cut, "k.log")
    assert [r.threads for r in runs] == [24, 24, 48]
    with pytest.raises(ParseError, match=r"^k.log \(run 1 of 3, line 1\): STREAM output has no "
                                         r"Add, Triad row: the run was cut off or killed"):
        check_complete(runs[0])
    assert check_complete(runs[1]).rate("Triad") == 94216.5


def test_a_garbled_run_names_the_file_line() -> None:
    text = load(SCALING)
    broken = text.replace("Triad:         186950.1", "Triad:         186950.1x")
    with pytest.raises(ParseError, match=rf"^{SCALING}:96: not a number in the STREAM Triad"):
        parse_stream_runs(broken, SCALING)
