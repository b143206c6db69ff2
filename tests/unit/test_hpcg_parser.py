"""HPCG parser on real summaries written by the reference HPCG 3.1 (.txt) and
3.0 (.yaml), run here with Open MPI on 2 ranks (tests/data/hpcg/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.errors import ParseError
from hpcval.parsers.hpcg import check_valid, parse_hpcg

DATA = Path(__file__).resolve().parents[1] / "data" / "hpcg"
TXT = "HPCG-Benchmark_3.1_np2_16x16x16.txt"
YAML = "HPCG-Benchmark-3.0_np2_16x16x16.yaml"


def load(name: str) -> str:
    return (DATA / name).read_text()


def test_hpcg_3_1_txt_summary() -> None:
    result = check_valid(parse_hpcg(load(TXT), TXT))
    assert result.version == "3.1"
    assert result.valid and result.rating_gflops == 2.04601
    assert result.rating_24_gflops == 2.06452
    assert result.time_s == 8.42468 and result.official_min_time_s == 1800
    assert not result.official  # 8 s: valid, but shorter than HPCG's 1800 s
    assert (result.ranks, result.threads_per_rank) == (2, 1)
    assert result.global_dims == (32, 16, 16) and result.local_dims == (16, 16, 16)
    assert set(result.checks.values()) == {"PASSED"} and len(result.checks) == 4
    assert "Reference version of ComputeMG used: Performance results are most likely " \
           "suboptimal" in result.notes
    assert result.entries["GFLOP/s Summary::Raw Total"] == "2.06452"


def test_hpcg_3_0_yaml_summary() -> None:
    result = check_valid(parse_hpcg(load(YAML), YAML))
    assert result.version == "3.0"
    assert result.rating_gflops == 1.23743 and result.rating_24_gflops == 1.24881
    assert result.time_s == 0.109666
    assert result.ranks == 2 and result.global_dims == (32, 16, 16)
    assert result.checks["Iteration Count Information"] == "PASSED"
    assert any(n.startswith("You have selected the QuickPath option") for n in result.notes)


@pytest.mark.parametrize("name", [TXT, YAML])
def test_invalid_run_is_refused(name: str) -> None:
    """A real summary with its result lines replaced by what HPCG's
    ReportResults.cpp writes when a verification fails (no recorded invalid
    run is at hand: the reference code does not fail on a healthy machine)."""
    text = load(name)
    if name.endswith(".txt"):
        text = text.replace("Iteration Count Information::Result=PASSED",
                            "Iteration Count Information::Result=FAILED")
        start = text.index("Final Summary::HPCG result is VALID")
        text = text[:start] + ("Final Summary::HPCG result is=INVALID.\nFinal Summary::Please "
                               "review the YAML file contents=You may NOT submit these results "
                               "for consideration.\n")
    else:
        text = text.replace("  Result: PASSED\n  Reference CG", "  Result: FAILED\n  Reference CG")
        start = text.index("  HPCG result is VALID")
        text = text[:start] + ("  HPCG result is: INVALID.\n  Please review the YAML file "
                               "contents: You may NOT submit these results for consideration.\n")
    result = parse_hpcg(text, "bad")
    assert result.valid is False and result.rating_gflops is None
    with pytest.raises(ParseError, match=r"bad: HPCG reports the result INVALID \(failed: "
                                         r"Iteration Count Information\)"):
        check_valid(result)


@pytest.mark.parametrize("name", [TXT, YAML])
def test_summary_cut_before_its_result(name: str) -> None:
    text = load(name)
    cut = text[: text.index("Final Summary")]
    with pytest.raises(ParseError, match="without its Final Summary"):
        parse_hpcg(cut, "cut")


def test_rating_that_is_not_a_number_names_the_line() -> None:
    lines = load(TXT).splitlines()
    at = next(i for i, ln in enumerate(lines) if "rating of=" in ln)
    lines[at] = lines[at].replace("=2.04601", "=2.04x601")
    with pytest.raises(ParseError, match=rf"x:{at + 1}: the HPCG GFLOP/s rating is not a number"):
        parse_hpcg("\n".join(lines), "x")


@pytest.mark.parametrize("text", ["", "hello\n", "HPCG-Benchmark\nversion=3.1\n"])
def test_not_a_summary(text: str) -> None:
    with pytest.raises(ParseError):
        parse_hpcg(text, "g")


@pytest.mark.parametrize("old, new, message", [
    ("rating of=2.04601", "rating of=inf",
     r"x:119: impossible value of the HPCG GFLOP/s rating: 'inf'"),
    ("Distributed Processes=2", "Distributed Processes=1e400",
     r"x:5: impossible value of the process count: '1e400'"),
])
def test_values_that_are_not_finite_are_refused(old: str, new: str, message: str) -> None:
    """'inf' read as a rating and a process count too large for a float
    (an OverflowError traceback) are refused, naming the line."""
    text = load(TXT)
    assert old in text
    with pytest.raises(ParseError, match=message):
        parse_hpcg(text.replace(old, new), "x")
