"""Readers that misread real output silently, or refused it without saying
why: each on real output, recorded here or found published (tests/data/*/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.core.errors import ParseError
from hpcval.parsers.imb import check_complete, parse_imb, parse_imb_runs
from hpcval.parsers.omb import parse_omb, parse_omb_runs

DATA = Path(__file__).resolve().parents[1] / "data"
RMA = DATA / "imb" / "rma_unidir_put_modes_impi2021.18.txt"
EXT = DATA / "imb" / "ext_modes_imb2021.7_impi2021.18.txt"
IO = DATA / "imb" / "io_modes_imb2021.7_impi2021.18.txt"
OSU_RUNS = DATA / "omb" / "5.8" / "metrics_operator_nine_runs_openmpi.txt"
NO_LAUNCH = DATA / "omb" / "launcher" / "openmpi4.1.4_executable_missing.txt"


def test_imb_rma_two_modes_read_as_two_tables() -> None:
    """IMB-RMA Unidir_put printed NON-AGGREGATE then AGGREGATE, same name and
    process count: two tables, each selectable; no silent first table."""
    result = parse_imb(RMA.read_text(), str(RMA))
    assert result.modes("Unidir_put") == ["NON-AGGREGATE", "AGGREGATE"]
    non = result.table("Unidir_put", mode="NON-AGGREGATE")
    agg = result.table("Unidir_put", mode="aggregate")
    assert non is not agg and non.mode == "NON-AGGREGATE" and agg.mode == "AGGREGATE"
    assert non.value(1, "t_usec") == 2280.49
    assert agg.value(1, "t_usec") == 0.32
    with pytest.raises(ParseError, match=r"Unidir_put\(np=2\) in 2 modes \(AGGREGATE, "
                                         r"NON-AGGREGATE\): give the mode to read"):
        result.table("Unidir_put")
    with pytest.raises(ParseError, match="no table for Unidir_put in mode BOTH"):
        result.table("Unidir_put", mode="BOTH")


def test_imb_ext_two_modes_read_as_two_tables() -> None:
    """IMB-EXT prints AGGREGATE first: read without a mode, Unidir_Put at 8 B
    was 0.11 us (aggregate) where the non-aggregate table says 1169.60 us.
    Each of the five two-mode benchmarks is refused without a mode and read
    in either; Window, printed in one mode with no MODE line, needs none."""
    result = parse_imb(EXT.read_text(), str(EXT))
    assert result.version == "2021.7" and result.finished
    two = ["Unidir_Get", "Unidir_Put", "Bidir_Get", "Bidir_Put", "Accumulate"]
    for bench in two:
        assert result.modes(bench) == ["AGGREGATE", "NON-AGGREGATE"]
        with pytest.raises(ParseError, match=rf"{bench}\(np=2\) in 2 modes \(AGGREGATE, "
                                             r"NON-AGGREGATE\): give the mode to read"):
            result.table(bench)
        with pytest.raises(ParseError, match="give the mode to read"):
            check_complete(result, bench, [0, 64], source=str(EXT))
    put = check_complete(result, "Unidir_Put", [0, 4, 8, 64], mode="NON-AGGREGATE",
                         source=str(EXT))
    assert put.mode == "NON-AGGREGATE" and put.value(8, "t_usec") == 1169.60
    agg = check_complete(result, "unidir_put", [8], mode="aggregate", source=str(EXT))
    assert agg.mode == "AGGREGATE" and agg.value(8, "t_usec") == 0.11
    assert agg.value(64, "mbytes_per_sec") == 468.51
    accumulate = result.table("Accumulate", mode="NON-AGGREGATE")
    assert accumulate.columns == ("bytes", "repetitions", "t_min_usec", "t_max_usec",
                                  "t_avg_usec")
    assert accumulate.value(8, "t_avg_usec") == 0.56
    assert result.table("Accumulate", mode="AGGREGATE").value(8, "t_avg_usec") == 177.79
    window = check_complete(result, "Window", [0, 64], source=str(EXT))
    assert window.mode is None and result.modes("Window") == []
    assert window.value(8, "t_max_usec") == 713.82
    # IMB-EXT measures 0, 4, 8, ... B: a size it skipped is named with the table's mode
    with pytest.raises(ParseError, match=r"IMB Bidir_Get \(np=2, NON-AGGREGATE\): no row "
                                         r"for 1 B \(measured: 0, 4, 8, 16, 32, 64\)"):
        check_complete(result, "Bidir_Get", [1], mode="NON-AGGREGATE", source=str(EXT))


def test_imb_io_modes_at_each_process_count() -> None:
    """IMB-IO writes in both modes at 1 and 2 processes; the nonblocking write
    and the read in AGGREGATE only; the banner IMB 2021.7 runs into its
    dashed line (``MPI-IO partn#---``)."""
    text = IO.read_text()
    result = parse_imb(text, str(IO))
    assert result.version == "2021.7" and result.finished
    assert len(parse_imb_runs(text, str(IO))) == 1
    assert [(t.processes, t.mode) for t in result.tables if t.benchmark == "P_Write_Indv"] \
        == [(1, "AGGREGATE"), (1, "NON-AGGREGATE"), (2, "AGGREGATE"), (2, "NON-AGGREGATE")]
    with pytest.raises(ParseError, match=r"P_Write_Indv\(np=2\) in 2 modes"):
        result.table("P_Write_Indv")
    with pytest.raises(ParseError, match=r"S_Write_Indv\(np=1\) in 2 modes"):
        check_complete(result, "S_Write_Indv", [64], source=str(IO))
    non = check_complete(result, "P_Write_Indv", [0, 64], mode="NON-AGGREGATE", source=str(IO))
    assert (non.processes, non.value(8, "t_avg_usec")) == (2, 23802.23)
    one = check_complete(result, "P_Write_Indv", [8], 1, mode="AGGREGATE", source=str(IO))
    assert (one.processes, one.value(8, "t_avg_usec")) == (1, 1594.88)
    assert result.table("S_Write_Indv", mode="NON-AGGREGATE").value(1, "t_usec") == 13181.95
    iwrite = check_complete(result, "P_IWrite_Indv", [0, 64], source=str(IO))  # one mode
    assert iwrite.mode == "AGGREGATE" and iwrite.value(64, "overlap_pct") == 100.00
    assert result.table("P_Read_Indv").value(64, "mbytes_per_sec") == 18.94
    open_close = result.table("Open_Close")
    assert open_close.mode is None and open_close.rows == [
        {"repetitions": 10, "t_min_usec": 359.98, "t_max_usec": 3172.47, "t_avg_usec": 1766.23}]


def test_imb_mpi1_tables_have_no_mode() -> None:
    result = parse_imb((DATA / "imb" / "pingpong_warm_impi2021.19.txt").read_text())
    table = check_complete(result, "PingPong", [0, 1048576])
    assert table.mode is None and result.modes("PingPong") == []


def test_osu_several_runs_read_run_by_run() -> None:
    """Nine OMB 5.8 runs in one output (a harness's markers and mpirun lines
    between them): one result each, in order; parse_omb refuses the whole,
    naming parse_omb_runs."""
    text = OSU_RUNS.read_text()
    runs = parse_omb_runs(text, str(OSU_RUNS))
    assert [r.title.split(" Test")[0] for r in runs] == [
        "MPI_Get_accumulate latency", "MPI_Accumulate latency", "MPI_Fetch_and_op latency",
        "MPI_Get latency", "MPI_Put Latency", "MPI Allreduce Latency", "MPI Latency",
        "MPI Bi-Directional Bandwidth", "MPI Bandwidth"]
    assert [len(r.rows) for r in runs] == [23, 23, 1, 23, 23, 19, 24, 23, 23]
    latency, bw = runs[6], runs[8]
    assert latency.rows[0] == {"size": 0, "latency_us": 0.80}
    assert bw.rows[-1] == {"size": 4194304, "bandwidth_mb_per_s": 11256.10}
    assert bw.preamble[-1].endswith("/mpi/pt2pt/osu_bw")  # its own mpirun line
    with pytest.raises(ParseError, match="parse_omb_runs"):
        parse_omb(text, str(OSU_RUNS))


def test_launcher_that_cannot_start_the_benchmark_is_quoted() -> None:
    """Open MPI's mpirun could not start osu_latency: the refusal quotes the
    launcher's own words, not only "not OMB output"."""
    with pytest.raises(ParseError) as err:
        parse_omb(NO_LAUNCH.read_text(), str(NO_LAUNCH))
    said = str(err.value)
    assert "not OMB output; the output says: mpirun.openmpi was unable to launch" in said
    assert "Executable: /opt/omb/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency" in said
    assert "2 total processes failed to start" in said


def test_wrf_fatal_that_sums_up_quotes_the_cause_above_it() -> None:
    """WRF-Chem's namelist error (wrf-model/WRF issue #1143): the FATAL only
    says "ERRORS while reading one or more namelists"; the cause, the line
    above it, is quoted first. A FATAL that names its own cause is kept."""
    from hpcval.parsers.wrf.log import check_complete as wrf_complete
    from hpcval.parsers.wrf.log import parse_wrf_log

    path = DATA / "wrf" / "wrfchem3.9_namelist_physics_issue1143_rsl.txt"
    log = parse_wrf_log(path.read_text(), str(path))
    assert log.fatal is not None
    assert log.fatal.startswith("ERROR while reading namelist physics [WRF: ERRORS while "
                                "reading one or more namelists")
    with pytest.raises(ParseError, match="ERROR while reading namelist physics"):
        wrf_complete(log)
    own = DATA / "wrf" / "quarter_ss_np2_no_wrfinput_rsl.error.0000"
    fatal = parse_wrf_log(own.read_text(), str(own)).fatal
    assert fatal is not None and fatal.startswith("program wrf: error opening wrfinput_d01")
