"""OMB parser on output recorded from real OMB 5.3, 7.1 and 7.4 runs (Intel MPI, this machine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.core.errors import ParseError
from hpcval.parsers.omb import check_complete, normalise_column, parse_omb

DATA = Path(__file__).resolve().parents[1] / "data" / "omb"


def load(version: str, name: str):
    path = DATA / version / name
    return parse_omb(path.read_text(), source=str(path))


@pytest.mark.parametrize("version", ["5.3", "7.1"])
def test_latency_columns_by_header(version: str) -> None:
    result = load(version, "osu_latency.txt")
    assert result.title == "MPI Latency Test"
    assert result.columns == ("size", "latency_us")
    assert result.sizes()[0] in (0, 1)
    assert all(v > 0 for v in result.column("latency_us").values())


def test_latency_values_5_3() -> None:
    result = load("5.3", "osu_latency.txt")
    assert result.value("latency_us", 0) == pytest.approx(2.22)
    assert result.value("latency_us", 1) == pytest.approx(0.17)
    assert max(result.sizes()) == 4194304


def test_bandwidth_7_1_datatype_line_skipped() -> None:
    result = load("7.1", "osu_bw.txt")
    assert result.columns == ("size", "bandwidth_mb_per_s")
    assert result.datatype == "MPI_CHAR"
    assert result.value("bandwidth_mb_per_s", 1048576) == pytest.approx(3112.25)


def test_validation_column_kept() -> None:
    result = load("7.1", "osu_latency_validation.txt")
    assert result.columns == ("size", "latency_us", "validation")
    assert result.value("latency_us", 4096) == pytest.approx(2.96)
    assert result.validation_failures() == []
    bw = load("7.1", "osu_bw_validation.txt")
    assert bw.validation_failures() == []


def test_validation_failure_reported() -> None:
    text = (DATA / "7.1" / "osu_latency_validation.txt").read_text()
    text = text.replace("4.30                Pass", "4.30                Fail")
    assert parse_omb(text).validation_failures() == [65536]


@pytest.mark.parametrize(("version", "name", "pairs", "window"), [
    ("5.3", "osu_mbw_mr_np4.txt", 2, "64"),
    ("5.3", "osu_mbw_mr_np4_p1_w16.txt", 1, "16"),
    ("7.1", "osu_mbw_mr_np4.txt", 2, "64"),
    ("7.1", "osu_mbw_mr_np4_p1_w16.txt", 1, "16"),
])
def test_mbw_mr_pairs_window(version: str, name: str, pairs: int, window: str) -> None:
    result = load(version, name)
    assert result.columns == ("size", "mb_per_s", "messages_per_s")
    assert (result.pairs, result.window) == (pairs, window)
    # messages/s = MB/s * 1e6 / size, as OMB computes it
    for size in (1, 1024):
        mbs, rate = result.value("mb_per_s", size), result.value("messages_per_s", size)
        assert rate == pytest.approx(mbs * 1e6 / size, rel=0.01)


def test_mbw_mr_vary_window_matrix() -> None:
    result = load("7.1", "osu_mbw_mr_np4_vary_window.txt")
    assert result.window == "varied"
    bw = result.matrices["uni_directional_bandwidth_mb_per_sec"]
    rate = result.matrices["message_rate_profile"]
    assert bw[4096][32] == pytest.approx(9216.69)
    assert rate[1][128] == pytest.approx(5872181.66)
    assert result.sizes() == [2**i for i in range(13)]


@pytest.mark.parametrize(("version", "name", "message"), [
    ("5.3", "osu_mbw_mr_bad_option.txt", "invalid option"),
    ("7.1", "osu_latency_np3_error.txt", "exactly two processes"),
    ("7.1", "osu_latency_killed.txt", "BAD TERMINATION"),
    ("7.1", "osu_bw_bad_option.txt", "no measured rows"),
    ("7.1", "osu_bw_truncated.txt", "truncated"),
    ("7.4", "osu_latency_np3_error.txt", "exactly two processes"),
    ("7.4", "osu_bw_bad_option.txt", "Usage: osu_bw"),
    ("7.4", "osu_latency_tail_killed.txt", "BAD TERMINATION"),
])
def test_failed_runs_raise(version: str, name: str, message: str) -> None:
    with pytest.raises(ParseError, match=message) as info:
        load(version, name)
    assert name in str(info.value)


def test_garbage_and_empty() -> None:
    with pytest.raises(ParseError, match="not OMB output"):
        parse_omb("hello\n")
    with pytest.raises(ParseError):
        parse_omb("")


def test_killed_run_rows_before_termination_are_incomplete() -> None:
    text = (DATA / "7.1" / "osu_latency_killed.txt").read_text()
    head = text.split("=====")[0]
    result = parse_omb(head)
    assert max(result.sizes()) == 524288
    with pytest.raises(ParseError, match="cut off"):
        check_complete(result, 4194304)
    check_complete(result, 524288)


def test_header_names_extra_columns() -> None:
    assert normalise_column("P50 Tail Lat(us)") == "p50_tail_lat_us"
    assert normalise_column("Avg Latency(us)") == "avg_latency_us"
    assert normalise_column("Bandwidth (MB/s)") == "bandwidth_mb_per_s"
    assert normalise_column("Messages/s") == "messages_per_s"


def test_tail_latency_columns_7_4() -> None:
    result = load("7.4", "osu_latency_tail.txt")
    assert result.columns == ("size", "avg_latency_us", "p50_tail_lat_us", "p90_tail_lat_us",
                              "p99_tail_lat_us")
    assert result.value("p99_tail_lat_us", 1) == pytest.approx(21.78)
    # the 5.x-7.1 name reaches the same column
    assert result.value("latency_us", 2) == pytest.approx(2.30)
    assert result.resolve("latency_us") == "avg_latency_us"


def test_validation_between_tail_columns_7_4() -> None:
    result = load("7.4", "osu_latency_validation_tail.txt")
    assert result.columns[:3] == ("size", "avg_latency_us", "validation")
    assert result.validation_failures() == []
    assert result.value("p50_tail_lat_us", 2) == pytest.approx(0.20)


def test_bandwidth_tail_and_mbw_mr_7_4() -> None:
    bw = load("7.4", "osu_bw_tail.txt")
    assert bw.columns == ("size", "bandwidth_mb_per_s", "p50_tail_bw_mb_per_s",
                          "p90_tail_bw_mb_per_s", "p99_tail_bw_mb_per_s")
    assert bw.value("p90_tail_bw_mb_per_s", 1) == pytest.approx(6.83)
    mbw = load("7.4", "osu_mbw_mr_np4_p2_w32.txt")
    assert (mbw.pairs, mbw.window) == (2, "32")
    assert mbw.value("messages_per_s", 1) == pytest.approx(1876326.50)


def test_killed_tail_run_7_4_keeps_columns_before_termination() -> None:
    text = (DATA / "7.4" / "osu_latency_tail_killed.txt").read_text()
    result = parse_omb(text.split("=====")[0])
    assert result.columns[-1] == "p99_tail_lat_us"
    assert result.sizes() == [2**i for i in range(16)]
    with pytest.raises(ParseError, match="cut off"):
        check_complete(result, 4194304)


# --- variants from the field (#16), on recorded real outputs (tests/data/omb/README.md) ---


def test_i_mpi_debug_and_launcher_lines_before_the_table() -> None:
    result = load("7.4", "osu_latency_i_mpi_debug5.txt")
    assert result.title == "MPI Latency Test v7.4"
    assert result.preamble[0].startswith("[0] MPI startup(): Intel(R) MPI Library")
    assert any("Pin cpu" in line for line in result.preamble)
    assert result.sizes() == [2**i for i in range(17)]
    assert result.value("latency_us", 1) == pytest.approx(251.38)
    assert result.value("avg_latency_us", 65536) == pytest.approx(43.35)
    assert result.units == {"avg_latency_us": "us"}
    check_complete(result, 65536)


@pytest.mark.parametrize("version, name, columns, size, overlap", [
    ("7.4", "osu_iallreduce_overlap.txt",
     ("size", "overall_us", "compute_us", "pure_comm_us", "overlap_pct"), 4, 17.94),
    ("5.7", "osu_iallreduce_full_pkb.txt",
     ("size", "overall_us", "compute_us", "coll_init_us", "mpi_test_us", "mpi_wait_us",
      "pure_comm_us", "overlap_pct"), 8, 52.86),
])
def test_overlap_column_keeps_its_unit(version: str, name: str, columns: tuple[str, ...],
                                       size: int, overlap: float) -> None:
    result = load(version, name)
    assert result.columns == columns
    assert result.units["overlap_pct"] == "%"
    assert result.units["pure_comm_us"] == "us"
    assert result.value("overlap_pct", size) == pytest.approx(overlap)


def test_runtime_message_inside_the_table_is_kept_apart() -> None:
    path = DATA / "7.4" / "osu_latency_i_mpi_debug5.txt"
    lines = path.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("1024 "))
    message = ("[vm:14770] 1 more process has sent help message help-mca-var.txt / "
               "invalid-value-enum")
    lines.insert(at, message)
    result = parse_omb("\n".join(lines) + "\n", source="merged.log")
    assert result.messages == [(at + 1, message)]
    assert result.value("latency_us", 1024) == pytest.approx(55.95)
    assert len(result.rows) == 17


def test_a_row_cut_in_the_middle_names_its_line() -> None:
    lines = (DATA / "7.4" / "osu_iallreduce_overlap.txt").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("64 "))
    lines[at] = lines[at][:30]
    with pytest.raises(ParseError,
                       match=rf"cut.txt: line {at + 1}: row has 2 fields, header names 5"):
        parse_omb("\n".join(lines) + "\n", source="cut.txt")


# --- several tables in one output: osu_latency -T all (one table per datatype) ---


def test_one_table_per_datatype_is_kept_apart() -> None:
    from hpcval.parsers.omb import parse_omb_tables

    text = (DATA / "7.4" / "osu_latency_T_all.txt").read_text()
    with pytest.raises(ParseError, match=r"t.txt: OMB output of 3 tables \(datatypes MPI_CHAR, "
                                         r"MPI_INT, MPI_FLOAT\).*parse_omb_tables"):
        parse_omb(text, "t.txt")
    tables = parse_omb_tables(text, "t.txt")
    assert list(tables) == ["MPI_CHAR", "MPI_INT", "MPI_FLOAT"]
    char, int_, float_ = tables.values()
    assert char.title == int_.title == "MPI Latency Test v7.4"
    assert char.sizes() == [2**i for i in range(13)]
    assert int_.sizes() == float_.sizes() == [2**i for i in range(2, 13)]
    # each size's figure is its own table's, none taken from another datatype
    assert (char.value("latency_us", 1), char.value("latency_us", 4)) == (913.84, 0.34)
    assert (int_.value("latency_us", 4), int_.value("latency_us", 4096)) == (0.78, 1.22)
    assert (float_.value("latency_us", 4), float_.value("latency_us", 4096)) == (0.42, 6.34)
    assert float_.units == {"avg_latency_us": "us"}
    assert len(char.preamble) == 4  # the allocation lines before the title
    check_complete(int_, 4096)


def test_a_single_table_output_is_one_entry() -> None:
    from hpcval.parsers.omb import parse_omb_tables

    text = (DATA / "7.4" / "osu_latency_i_mpi_debug5.txt").read_text()
    (only,) = parse_omb_tables(text, "one.txt").values()
    assert only.value("latency_us", 65536) == parse_omb(text).value("latency_us", 65536)


def test_a_second_table_of_the_same_datatype_is_refused() -> None:
    """Two runs' outputs in one file, or a second header after the rows (the
    KeyError of a column the first rows lack), name the line."""
    from hpcval.parsers.omb import parse_omb_tables

    text = (DATA / "7.4" / "osu_latency_T_all.txt").read_text()
    lines = text.splitlines()
    with pytest.raises(ParseError, match=rf"two.txt: line {len(lines) + 7}: a second MPI_CHAR "
                                         "table"):
        parse_omb_tables(text + text, "two.txt")
    at = next(i for i, ln in enumerate(lines) if ln.startswith("# Datatype: MPI_INT"))
    lines[at:at + 2] = ["# Size         Avg Latency(us)     Extra"]
    with pytest.raises(ParseError, match=rf"h.txt: line {at + 1}: a second MPI_CHAR table"):
        parse_omb("\n".join(lines) + "\n", "h.txt")


def test_open_mpi_help_block_before_and_another_ranks_lines_inside_the_table() -> None:
    """Open MPI 4.1.4 run: its help block and an ORTE_ERROR_LOG line before
    the title are kept as the preamble; the other rank's allocation lines
    printed between the 16 and 32 B rows do not cost a row."""
    result = load("7.4", "osu_latency_openmpi4.1.4_help_block.txt")
    assert result.preamble[1] == "An invalid value was supplied for an enum variable."
    assert "ORTE_ERROR_LOG" in result.preamble[6]
    assert result.sizes() == [2**i for i in range(21)]
    assert result.value("latency_us", 16) == pytest.approx(0.15)
    assert result.value("latency_us", 32) == pytest.approx(0.16)
    assert result.value("latency_us", 1048576) == pytest.approx(1917.37)
    check_complete(result, 1048576)
