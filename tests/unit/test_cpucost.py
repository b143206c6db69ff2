"""CPU cost wrapper: real runs of small programs and a recorded two-rank run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hpcval.core.errors import ParseError
from hpcval.node.cpucost import MARKER, cpu_available_pct, cpu_busy_pct, parse_cpucost, run

DATA = Path(__file__).resolve().parents[1] / "data" / "imb"


def test_recorded_two_rank_run() -> None:
    path = DATA / "cpucost_uniband_waitmode_impi2021.19.err"
    records = parse_cpucost(path.read_text(), str(path))
    assert [r.rank for r in records] == [0, 1]
    assert records[1].sys_s == pytest.approx(41.467789)
    assert {r.counters for r in records} == {"unsupported"}
    assert records[0].instructions is None
    busy = cpu_busy_pct(records)
    assert busy == pytest.approx((records[0].busy_pct + records[1].busy_pct) / 2)
    assert cpu_available_pct(records) == pytest.approx(100.0 - busy)


def test_run_reports_cpu_and_exit_code(capfd: pytest.CaptureFixture[str]) -> None:
    code = "import sys; sum(range(200000)); sys.exit(3)"
    assert run(["--", sys.executable, "-c", code]) == 3
    err = capfd.readouterr().err
    (record,) = parse_cpucost(err)
    assert record.wall_s > 0
    assert record.user_s + record.sys_s > 0
    assert record.counters in ("ok", "unsupported", "unavailable")


def test_no_or_damaged_lines() -> None:
    with pytest.raises(ParseError, match="did not finish"):
        parse_cpucost("IMB output only\n")
    with pytest.raises(ParseError, match="damaged"):
        parse_cpucost(f"{MARKER} rank=0 wall_s=abc user_s=1 sys_s=0 instructions=na "
                      "cycles=na counters=unsupported\n")


def test_usage_without_program() -> None:
    assert run(["--"]) == 2


def test_records_sharing_a_line_are_both_read() -> None:
    """A real two-rank run whose records the launcher forwarded interleaved on one
    line (written by an earlier version that put the newline in a second write)."""
    path = DATA / "cpucost_uniband_waitmode_interleaved_impi2021.18.err"
    text = path.read_text()
    assert f"counters=ok{MARKER}" in text
    records = parse_cpucost(text, str(path))
    assert [r.rank for r in records] == [0, 1]
    assert all(r.counters == "ok" for r in records)
