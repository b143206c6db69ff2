"""Parser for the cfdio proxy's result line, on real recorded output."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.core.errors import ParseError
from hpcval.parsers.cfdio import STRATEGIES, output_cost, parse_cfdio

DATA = Path(__file__).resolve().parents[1] / "data" / "cfdio"


def _read(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_stencil_lines_parse(strategy: str) -> None:
    r = parse_cfdio(_read(f"stencil_{strategy}_2ranks.out"))
    assert r["mode"] == "stencil"
    assert r["strategy"] == strategy
    assert r["ranks"] == 2
    assert r["grid"] == "64x32x32"
    assert r["verified"] == 1
    assert r["checksum"] == "f1ac4239a8b6ac1a"
    expected_bytes = 0 if strategy == "none" else 2 * 64 * 32 * 32 * 8
    assert r["bytes_written"] == expected_bytes
    assert r["outputs"] == (0 if strategy == "none" else 2)


def test_checksums_equal_across_strategies() -> None:
    sums = {parse_cfdio(_read(f"stencil_{s}_2ranks.out"))["checksum"] for s in STRATEGIES}
    assert len(sums) == 1


def test_triad_line() -> None:
    r = parse_cfdio(_read("triad_2ranks.out"))
    assert r["mode"] == "triad"
    assert r["n_per_rank"] == 5000000
    assert r["triad_MBs"] == pytest.approx(10998.8)


def test_failed_run_quotes_proxy_error() -> None:
    with pytest.raises(ParseError, match="No space left on device"):
        parse_cfdio(_read("enospc_gather-to-root.out"))


def test_truncated_line_is_an_error() -> None:
    line = _read("stencil_mpiio_2ranks.out").split(" output_s=")[0]
    with pytest.raises(ParseError, match="lacks"):
        parse_cfdio(line)


def test_garbage_and_failed_verification() -> None:
    with pytest.raises(ParseError, match="no CFDIO"):
        parse_cfdio("hello\n")
    bad = _read("stencil_mpiio_2ranks.out").replace("verified=1", "verified=0")
    with pytest.raises(ParseError, match="verified=0"):
        parse_cfdio(bad)
    with pytest.raises(ParseError, match="not a number"):
        parse_cfdio("CFDIO mode=triad ranks=x\n")


def test_output_cost() -> None:
    none = parse_cfdio(_read("stencil_none_2ranks.out"))
    mpiio = parse_cfdio(_read("stencil_mpiio_2ranks.out"))
    cost, share = output_cost(mpiio, none)
    assert cost == pytest.approx(float(mpiio["total_s"]) - float(none["total_s"]))
    assert 0 < share < 1
    assert output_cost(none, none)[0] == 0


def test_read_lines_parse_per_reader_and_aggregate() -> None:
    one = parse_cfdio((DATA / "read_1reader.out").read_text())
    two = parse_cfdio((DATA / "read_2readers.out").read_text())
    assert (one["mode"], one["readers"], two["readers"]) == ("read", 1, 2)
    assert one["bytes_per_reader"] == 64 << 20
    assert len(two["reader_MBs"]) == 2
    assert two["min_reader_MBs"] == min(two["reader_MBs"])
    assert two["max_reader_MBs"] == max(two["reader_MBs"])
    # aggregate = all bytes over the slowest reader's time
    expect = 2 * two["bytes_per_reader"] / two["total_s"] / 1e6
    assert abs(two["aggregate_MBs"] - expect) / expect < 1e-3
    assert two["cache_resident"] == 0.0  # the page cache was really dropped


def test_read_line_with_missing_reader_is_an_error() -> None:
    line = (DATA / "read_2readers.out").read_text().replace("reader_MBs=1629.8,1629.5",
                                                            "reader_MBs=1629.8")
    with pytest.raises(ParseError, match="1 reader bandwidths for 2 readers"):
        parse_cfdio(line)
    with pytest.raises(ParseError, match="did not match"):
        parse_cfdio((DATA / "read_2readers.out").read_text().replace("verified=1",
                                                                     "verified=0"))


def test_failed_read_quotes_the_full_disk() -> None:
    with pytest.raises(ParseError, match="No space left on device"):
        parse_cfdio((DATA / "enospc_read.out").read_text(), "enospc_read.out")


def test_stencil_with_triad_reports_the_fraction() -> None:
    r = parse_cfdio((DATA / "stencil_with_triad_2ranks.out").read_text())
    assert r["stencil_fraction"] == pytest.approx(r["stencil_MBs"] / r["triad_MBs"], rel=1e-3)
    with pytest.raises(ParseError, match="triad result is wrong"):
        parse_cfdio((DATA / "stencil_with_triad_2ranks.out").read_text().replace(
            "valid=1", "valid=0"))


def test_usage_means_an_older_binary() -> None:
    text = ("usage: cfdio [--mode stencil|triad] [--local NX NY NZ | --global NX NY NZ]\n"
            "             [--steps N] [--every N]\n")
    with pytest.raises(ParseError, match="older than the check"):
        parse_cfdio(text)
