"""IMB output parsing, on output recorded from real IMB runs (Intel MPI 2021)."""

from __future__ import annotations

import pytest

from hpcval.core.errors import ParseError
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


# --- variants from the field (#16), on recorded real outputs (tests/data/imb/README.md) ---


def test_i_mpi_debug_startup_lines_before_the_table(data_dir):
    text = read(data_dir, "pingpong_i_mpi_debug5_impi2021.18.txt")
    assert text.startswith("[0] MPI startup(): Intel(R) MPI Library")
    result = parse_imb(text)
    table = check_complete(result, "PingPong", [0, 65536])
    assert table.sizes() == [0] + [2**i for i in range(17)]
    assert table.value(0, "t_usec") == 2.94
    assert table.value(65536, "mbytes_per_sec") == 26864.25


def test_multi_0_keeps_every_block_with_its_groups(data_dir):
    result = parse_imb(read(data_dir, "multi0_pingpong_allreduce_np4_impi2021.18.txt"))
    got = [(t.benchmark, t.processes, t.groups) for t in result.tables]
    assert got == [("Multi-PingPong", 2, 2), ("Multi-Allreduce", 2, 2), ("Allreduce", 4, None)]
    pp = result.table("Multi-PingPong")
    assert pp.value(4096, "mbytes_per_sec") == 1390.25
    assert pp.value(0, "t_max_usec") == 6.55
    # the block after the multi blocks is not lost
    assert result.table("Allreduce", processes=4).value(4096, "t_avg_usec") == 8.58
    assert result.finished


def test_multi_1_gives_one_row_per_group(data_dir):
    result = parse_imb(read(data_dir, "multi1_pingpong_allreduce_np4_impi2021.18.txt"))
    pp = result.table("Multi-PingPong")
    assert pp.columns[:2] == ("group", "bytes") and pp.groups == 2
    rows_4096 = [r for r in pp.rows if r["bytes"] == 4096]
    assert [(r["group"], r["mbytes_per_sec"]) for r in rows_4096] == [(0, 1308.65), (1, 1306.70)]
    assert len(pp.rows) == 2 * 14
    assert result.table("Allreduce", processes=4).value(4, "t_max_usec") == 31.42


def test_multi_1_splits_into_one_table_per_group(data_dir):
    """What hpcval vet runs: every node's (or pair's) PingPong at once, one group
    each; -msglen with repeated sizes gives one row per sample and group."""
    result = parse_imb(read(data_dir, "multi1_pingpong_msglen_np6_impi2021.18.txt"))
    pp = result.table("Multi-PingPong")
    assert pp.groups == 3 and pp.members == {0: (0, 1), 1: (2, 3), 2: (4, 5)}
    tables = pp.group_tables()
    assert list(tables) == [0, 1, 2]
    assert tables[1].columns == ("bytes", "repetitions", "t_usec", "mbytes_per_sec")
    assert [r["mbytes_per_sec"] for r in tables[1].rows if r["bytes"] == 1048576] == [
        7324.60, 7079.21, 8752.85]
    assert [r["t_usec"] for r in tables[2].rows if r["bytes"] == 8] == [7.52, 12.35, 5.46]
    assert tables[0].members == {0: (0, 1)} and result.hosts == {}


def test_multi_1_placement_ties_groups_to_hosts(data_dir):
    """Recorded on the lab: srun --distribution=arbitrary with SLURM_HOSTFILE
    lab-n3, lab-n5, lab-n1, lab-n8 and I_MPI_DEBUG=4: rank 0-1 (group 0) on
    lab-n3 and lab-n5, group 1 on lab-n1 and lab-n8."""
    result = parse_imb(read(data_dir, "multi1_pingpong_msglen_arbitrary_lab_np4_impi2021.18.txt"))
    assert result.hosts == {0: "lab-n3", 1: "lab-n5", 2: "lab-n1", 3: "lab-n8"}
    tables = result.table("Multi-PingPong").group_tables()
    hosts = {g: tuple(result.hosts[r] for r in t.members[g]) for g, t in tables.items()}
    assert hosts == {0: ("lab-n3", "lab-n5"), 1: ("lab-n1", "lab-n8")}
    assert [r["mbytes_per_sec"] for r in tables[1].rows if r["bytes"] == 1048576] == [
        62.92, 99.76, 89.84]
    assert result.finished


def test_group_tables_needs_multi_1(data_dir):
    result = parse_imb(read(data_dir, "multi0_pingpong_allreduce_np4_impi2021.18.txt"))
    with pytest.raises(ParseError, match="-multi 1"):
        result.table("Multi-PingPong").group_tables()


def test_show_tail_is_not_an_option_of_imb_2021(data_dir):
    """IMB 2021.11 (the installed one) and the upstream sources know no
    ``-show_tail``: IMB takes the words for benchmark names, says so, and runs."""
    text = read(data_dir, "show_tail_option_unknown_impi2021.18.txt")
    assert "Invalid benchmark name -show_tail" in text
    result = parse_imb(text)
    assert [t.benchmark for t in result.tables] == ["PingPong", "Allreduce"]
    assert result.table("PingPong").value(4096, "t_usec") == 0.43


def test_intel_space_r_2018_banner_and_open_mpi_messages(data_dir):
    text = read(data_dir, "imb2018_openmpi4.1.4_help_message.txt")
    assert "Intel (R) MPI Benchmarks 2018 Update 1" in text
    result = parse_imb(text)
    assert result.version == "2018"
    table = check_complete(result, "PingPong", [0, 4194304])
    assert table.value(4194304, "mbytes_per_sec") == 7200.43


def test_runtime_messages_interleaved_in_a_table(data_dir):
    """stderr merged into stdout: Open MPI's help-message lines (recorded in the
    same run, after the table) placed inside the table, as a job log can hold
    them; the rows around them are all kept."""
    lines = read(data_dir, "imb2018_openmpi4.1.4_help_message.txt").splitlines()
    messages = [ln for ln in lines if ln.startswith("[vm:")]
    assert len(messages) == 2
    body = [ln for ln in lines if not ln.startswith("[vm:")]
    at = next(i for i, ln in enumerate(body) if ln.split()[:1] == ["65536"])
    body[at:at] = messages + lines[:7]  # the two lines and the "-----" help block
    result = parse_imb("\n".join(body) + "\n", source="merged.log")
    table = check_complete(result, "PingPong", [32768, 65536, 4194304])
    assert len(table.rows) == 24
    assert table.value(65536, "t_usec") == 7.79
    assert [m for _, m in table.messages][:2] == messages


def test_imb_2_3_banner_and_a_wrapped_table_is_refused(data_dir):
    """IMB 2.3 output as posted to the Open MPI users list: the mail client
    wrapped every row; the parser names the line instead of guessing."""
    text = read(data_dir, "imb2.3_sendrecv_wrapped_ompi_users_2007-05-3288.txt")
    with pytest.raises(ParseError, match=r"x.txt:29: IMB Sendrecv row has 1 fields, header has "
                                         r"5 .*'0.00' \(a wrapped, cut or corrupted row\)"):
        parse_imb(text, source="x.txt")
    # unwrapped (the wrapped tail of each row joined back), it reads as IMB 2.3
    lines = text.splitlines()
    joined = []
    for ln in lines:
        if joined and (ln == "Mbytes/sec" or ln.replace(".", "").isdigit()):
            joined[-1] += f" {ln}"
        else:
            joined.append(ln)
    result = parse_imb("\n".join(joined) + "\n")
    assert result.version == "2.3" and result.finished  # IMB 2.x prints no MPI_Finalize line
    table = check_complete(result, "Sendrecv", [0, 4194304])
    assert table.value(4194304, "mbytes_per_sec") == 415.77
    assert table.value(1048576, "t_avg_usec") == 3868.21


def test_barrier_table_of_a_run_cut_before_finalize_is_refused(data_dir):
    """Barrier rows have no #bytes; a run that stops after them (before
    MPI_Finalize) is refused with a ParseError, not an IndexError."""
    text = read(data_dir, "allreduce_sendrecv_npmin1_impi2021.19.txt")
    result = parse_imb(text[:text.index("All processes entering MPI_Finalize")], "cut.txt")
    assert not result.finished and result.table("Barrier").rows
    with pytest.raises(ParseError, match=r"cut.txt: IMB output ends before 'All processes "
                                         r"entering MPI_Finalize' \(last Barrier size: none\)"):
        check_complete(result, "Barrier", [], source="cut.txt")


def test_imb_2_3_without_finalize_and_runtime_messages_inside_the_table(data_dir):
    """IMB 2.3 output as an Open MPI MTT run stored it (posted to the MTT
    developers' list): Open MPI's 16-line signal report sits between the
    262144 and 524288 rows, and IMB 2.x prints no MPI_Finalize line. Every
    row is kept, the report is kept apart."""
    text = read(data_dir, "imb2.3_allgatherv_np8_messages_in_table_mtt-devel_2008-01-0201.txt")
    assert "All processes entering MPI_Finalize" not in text
    result = parse_imb(text, source="mtt.txt")
    assert result.version == "2.3" and result.finished
    table = check_complete(result, "Allgatherv", [0, 262144, 524288, 4194304], processes=8)
    assert table.sizes() == [0] + [2**i for i in range(23)]
    assert table.value(262144, "t_avg_usec") == 12545.59
    assert table.value(524288, "t_min_usec") == 27091.03
    assert table.value(4194304, "t_max_usec") == 130419.42
    assert len(table.messages) == 16
    assert table.messages[0] == (48, "[svbu-mpi031:12247] *** Process received signal ***")
    assert table.messages[-1][1].endswith("*** End of error message ***")
