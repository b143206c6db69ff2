"""IMB output parsing, on output recorded from real IMB runs (Intel MPI 2021)."""

from __future__ import annotations

import pytest

from hpcval.errors import ParseError
from hpcval.parsers.imb import check_complete, normalise_column, parse_imb, parse_imb_runs

PINGPONG_SIZES = [0, 8, 2048, 65536, 1 << 20, 4 << 20]


def read(data_dir, name):
    return (data_dir / "imb" / name).read_text()


def test_pingpong_table(data_dir):
    result = parse_imb(read(data_dir, "pingpong_warm_impi2021.19.txt"))
    assert result.version == "2021.11"
    assert result.finished
    table = check_complete(result, "PingPong", PINGPONG_SIZES, processes=2)
    assert table.columns == ("bytes", "repetitions", "t_usec", "mbytes_per_sec")
    assert table.sizes() == [0] + [2**i for i in range(23)]
    assert table.value(0, "t_usec") == 2.01
    assert table.value(1 << 20, "mbytes_per_sec") == pytest.approx(
        table.row(1 << 20)["mbytes_per_sec"])
    assert all(r["repetitions"] == 200 for r in table.rows)
    assert table.series("t_usec")[1] == (1, 0.38)


def test_cache_cold_run_parses(data_dir):
    text = read(data_dir, "pingpong_cold_impi2021.19.txt")
    assert "-off_cache 32" in text
    table = check_complete(parse_imb(text), "PingPong", PINGPONG_SIZES)
    assert len(table.rows) == 24


def test_timeout_row_is_reported_with_imb_reason(data_dir):
    result = parse_imb(read(data_dir, "pingpong_timeout_impi2021.19.txt"))
    table = result.table("PingPong")
    assert table.rows == []
    assert table.errors[0].kind == "time-out"
    with pytest.raises(ParseError, match=r"0 B not measured: time-out: Time limit"):
        check_complete(result, "PingPong", [0])


def test_out_of_mem_row(data_dir):
    result = parse_imb(read(data_dir, "pingpong_outofmem_impi2021.19.txt"))
    table = result.table("PingPong")
    assert table.sizes() == [0, 262144, 524288]
    assert table.errors[0].bytes == 1048576 and table.errors[0].kind == "out-of-mem"
    with pytest.raises(ParseError, match="1048576 B not measured: out-of-mem"):
        check_complete(result, "PingPong", [1048576])
    with pytest.raises(ParseError, match="out-of-mem"):
        check_complete(result, "PingPong", [0])


def test_truncated_output_is_an_error(data_dir):
    result = parse_imb(read(data_dir, "pingpong_truncated_impi2021.19.txt"))
    assert not result.finished
    with pytest.raises(ParseError, match=r"no row for 8192 B"):
        check_complete(result, "PingPong", [8192])
    with pytest.raises(ParseError, match="crashed or was killed"):
        check_complete(result, "PingPong", [0, 4096])


def test_several_benchmarks_and_process_counts(data_dir):
    result = parse_imb(read(data_dir, "allreduce_sendrecv_npmin1_impi2021.19.txt"))
    got = [(t.benchmark, t.processes) for t in result.tables]
    assert got == [("Allreduce", 1), ("Allreduce", 2), ("Sendrecv", 1), ("Sendrecv", 2),
                   ("Barrier", 1), ("Barrier", 2)]
    allreduce = result.table("Allreduce")
    assert allreduce.processes == 2
    assert allreduce.columns[-3:] == ("t_min_usec", "t_max_usec", "t_avg_usec")
    assert result.table("Allreduce", processes=1).value(1024, "t_avg_usec") == 0.05
    assert result.table("Sendrecv").value(1024, "mbytes_per_sec") == 1545.70
    barrier = result.table("Barrier")
    assert barrier.sizes() == [] and barrier.rows[0]["t_avg_usec"] >= 0
    pp = parse_imb(read(data_dir, "pingpong_pingping_impi2021.19.txt"))
    assert [t.benchmark for t in pp.tables] == ["PingPong", "PingPing"]


def test_missing_table_names_what_exists(data_dir):
    result = parse_imb(read(data_dir, "pingpong_warm_impi2021.19.txt"))
    with pytest.raises(ParseError, match=r"no table for Alltoall .*PingPong\(np=2\)"):
        result.table("Alltoall")


@pytest.mark.parametrize("text, message", [
    ("", "no IMB result table"),
    ("Segmentation fault (core dumped)\n", "no IMB result table"),
    ("# Benchmarking PingPong\n# #processes = 2\n#bytes #repetitions t[usec] Mbytes/sec\n"
     "0 1000 abc 0.00\n", "not a number in an IMB table row: 'abc'"),
    ("# Benchmarking PingPong\n# #processes = 2\n#bytes #repetitions t[usec] Mbytes/sec\n"
     "0 1000 0.3\n", "row has 3 fields, header has 4"),
])
def test_garbage_is_rejected(text, message):
    with pytest.raises(ParseError, match=message):
        parse_imb(text, source="out.txt")


def test_garbage_row_in_real_output_names_line(data_dir):
    lines = read(data_dir, "pingpong_warm_impi2021.19.txt").splitlines()
    assert lines[39].split()[0] == "16"
    lines[39] = lines[39].replace("0.38", "0.3#8")
    with pytest.raises(ParseError, match=r"out.txt:40: not a number"):
        parse_imb("\n".join(lines), source="out.txt")


@pytest.mark.parametrize("header, name", [
    ("#bytes", "bytes"), ("t_min[usec]", "t_min_usec"), ("Mbytes/sec", "mbytes_per_sec"),
    ("overlap[%]", "overlap_pct"), ("t_CPU[usec]", "t_cpu_usec"), ("Msg/sec", "msg_per_sec"),
])
def test_column_names(header, name):
    assert normalise_column(header) == name


def test_runs_of_one_job_are_split(data_dir):
    one = read(data_dir, "uniband_biband_impi2021.19.txt")
    runs = parse_imb_runs(one + one + one, source="job.out")
    assert len(runs) == 3
    assert all(r.finished for r in runs)
    assert [t.benchmark for t in runs[2].tables] == ["Uniband", "Biband"]
    assert runs[1].table("Uniband").columns[-2:] == ("mbytes_per_sec", "msg_per_sec")


def test_a_run_cut_short_among_several_is_reported(data_dir):
    one = read(data_dir, "p2p_pingpong_unirandom_impi2021.19.txt")
    runs = parse_imb_runs(one + one[: len(one) // 2], source="job.out")
    assert runs[0].finished and not runs[1].finished
    # the cut-off row is dropped, not reported as garbage
    assert runs[1].table("PingPong").sizes() == [1024, 2048]
    with pytest.raises(ParseError, match=r"job.out \(run 2\): IMB output ends before"):
        check_complete(runs[1], "PingPong", [1024], source="job.out (run 2)")
    with pytest.raises(ParseError, match=r"no table for Unirandom"):
        check_complete(runs[1], "Unirandom", [65536], source="job.out (run 2)")


def test_nbc_overlap_columns(data_dir):
    table = parse_imb(read(data_dir, "nbc_iallreduce_impi2021.19.txt")).table("Iallreduce")
    assert table.columns[2:] == ("t_ovrl_usec", "t_pure_usec", "t_cpu_usec", "overlap_pct")
    assert table.value(1024, "overlap_pct") == 69.44


def test_family_tables_at_each_process_count(data_dir):
    result = parse_imb(read(data_dir, "family_npmin1_impi2021.19.txt"))
    for bench in ("Sendrecv", "Exchange", "Allreduce", "Alltoall"):
        assert {t.processes for t in result.tables if t.benchmark == bench} == {1, 2}
        row = result.table(bench).row(8)
        assert row["t_min_usec"] <= row["t_avg_usec"] <= row["t_max_usec"]
