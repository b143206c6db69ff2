"""HPCG parser on real summaries written by the reference HPCG 3.1 (.txt) and
3.0 (.yaml), run here with Open MPI on 2 ranks (tests/data/hpcg/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.core.errors import ParseError
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


# --- Intel MKL's optimised HPCG: the run's name instead of HPCG-Benchmark ---

MKL_YAML = "n104-4p-1t-V3.0_2019.03.27.09.42.12.yaml"
MKL_TXT = "n104-96p-1t_V3.1_2023-08-25_16-18-10.txt"


def test_mkl_hpcg_3_0_yaml_summary() -> None:
    """xhpcg_skx of MKL 2018.3, 4 ranks (tests/data/hpcg/README.md): first
    line ``n104-4p-1t version: V3.0``."""
    result = check_valid(parse_hpcg(load(MKL_YAML), MKL_YAML))
    assert (result.name, result.version) == ("n104-4p-1t", "V3.0")
    assert result.rating_gflops == 2.36085 and result.rating_24_gflops == 2.37075
    assert result.time_s == 34.9641 and not result.official
    assert (result.ranks, result.threads_per_rank) == (4, 1)
    assert result.global_dims == (208, 208, 104) and result.local_dims == (104, 104, 104)
    assert set(result.checks.values()) == {"PASSED"} and len(result.checks) == 4


def test_mkl_hpcg_3_1_txt_summary() -> None:
    """xhpcg_avx2 of oneMKL 2023.2, 96 ranks: first line ``n104-96p-1t``,
    sections written `` Final Summary ::`` with blanks."""
    result = check_valid(parse_hpcg(load(MKL_TXT), MKL_TXT))
    assert (result.name, result.version) == ("n104-96p-1t", "V3.1")
    assert result.rating_gflops == 53.8206 and result.rating_24_gflops == 54.0003
    assert result.time_s == 74.2943 and result.official_min_time_s == 1800
    assert (result.ranks, result.threads_per_rank) == (96, 1)
    assert result.global_dims == (416, 416, 624) and result.local_dims == (104, 104, 104)
    assert "Reference version of ComputeDotProduct used: Performance results are most " \
           "likely suboptimal" in result.notes


def test_reference_summaries_are_named_hpcg_benchmark() -> None:
    assert parse_hpcg(load(TXT)).name == parse_hpcg(load(YAML)).name == "HPCG-Benchmark"


@pytest.mark.parametrize("name", [MKL_YAML, MKL_TXT])
def test_mkl_summary_invalid_or_cut(name: str) -> None:
    """HPCG's INVALID line in place of the VALID one, and the file cut before
    its Final Summary: refused, naming the file."""
    text = load(name)
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if "HPCG result is VALID" in ln)
    sep = "=" if name.endswith(".txt") else ": "
    lines[at] = lines[at].split("HPCG result")[0] + f"HPCG result is{sep}INVALID."
    with pytest.raises(ParseError, match=rf"^{name}: HPCG reports the result INVALID"):
        check_valid(parse_hpcg("\n".join(lines), name))
    cut = text[:text.index("Final Summary")]
    with pytest.raises(ParseError, match=rf"^{name}: HPCG summary without its Final Summary"):
        parse_hpcg(cut, name)


@pytest.mark.parametrize("text", ["n104-4p-1t\nno summary here\n",
                                  "n12 version: 3\nMachine Summary:\n",
                                  "nothing\nMachine Summary=\n"])
def test_not_a_summary_names_the_file(text: str) -> None:
    with pytest.raises(ParseError, match=r"^x.txt: not an HPCG summary"):
        parse_hpcg(text, "x.txt")


def test_the_check_finds_mkl_summaries(tmp_path: Path) -> None:
    """The shell line the check runs after each HPCG run keeps the summary
    (reference or MKL name) under hpcg-<run>-; the check finds it, not MKL's
    log files."""
    import subprocess

    from hpcval.rfm.hpcg import keep_summary, kept_summaries

    (tmp_path / MKL_TXT).write_text(load(MKL_TXT))
    (tmp_path / "hpcg20230825T161510.txt").write_text("Call [0] Scaled Residual\n")
    (tmp_path / "hpcg_log_2019.03.27.09.38.45.txt").write_text("WARNING\n")
    subprocess.run(["sh", "-c", keep_summary(1)], cwd=tmp_path, check=True)
    (tmp_path / TXT).write_text(load(TXT))
    subprocess.run(["sh", "-c", keep_summary(2)], cwd=tmp_path, check=True)
    assert [p.name for p in kept_summaries(tmp_path, 1)] == [f"hpcg-1-{MKL_TXT}"]
    assert [p.name for p in kept_summaries(tmp_path, 2)] == [f"hpcg-2-{TXT}"]
    assert (tmp_path / "hpcg_log_2019.03.27.09.38.45.txt").exists()
    assert parse_hpcg(kept_summaries(tmp_path, 1)[0].read_text()).rating_gflops == 53.8206
