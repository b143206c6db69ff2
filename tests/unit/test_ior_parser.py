"""IOR parser on real IOR 4.0.0 output recorded in tests/data/ior (see its README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.core.errors import ParseError
from hpcval.parsers.ior import ior_errors, parse_ior_json, parse_ior_text

DATA = Path(__file__).resolve().parents[1] / "data" / "ior"


def load(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize("api", ["posix", "mpiio"])
@pytest.mark.parametrize("layout", ["fpp", "shared"])
@pytest.mark.parametrize("ranks", [1, 2])
def test_every_recorded_summary_parses(api: str, layout: str, ranks: int) -> None:
    name = f"{api}_{layout}_{ranks}.json"
    result = parse_ior_json(load(name), name)
    assert result.api == api.upper()
    assert result.file_per_proc is (layout == "fpp")
    assert result.layout == ("file-per-process" if layout == "fpp" else "shared")
    assert result.num_tasks == ranks
    assert result.block_size == 16 << 20 and result.transfer_size == 1 << 20
    assert result.reorder_tasks and result.repetitions == 2
    assert result.version == "4.0.0"
    assert set(result.operations) == {"write", "read"}
    for op in result.operations.values():
        assert op.bw_min_mib <= op.bw_mean_mib <= op.bw_max_mib
        assert len(op.repetitions_mib) == 2
        assert max(op.repetitions_mib) == pytest.approx(op.bw_max_mib)


def test_values_of_posix_file_per_process_two_ranks() -> None:
    result = parse_ior_json(load("posix_fpp_2.json"))
    write, read = result.op("write"), result.op("read")
    assert write.bw_max_mib == 2083.4468 and write.bw_mean_mib == 2037.4334
    assert write.bw_min_mib == 1991.4200 and write.bw_std_mib == 46.0134
    assert write.repetitions_mib == (2083.4468, 1991.4200)
    assert write.ops_max == 2083.4468 and write.mean_time_s == 0.0157
    assert read.bw_max_mib == 18711.5193 and read.bw_mean_mib == 17839.8133
    assert result.max_mib("read") == 18711.5193 and result.mean_mib("write") == 2037.4334
    assert result.aggregate_mib == 32.0 and result.tasks_per_node == 2
    assert result.command_line is not None and " -C " in result.command_line


def test_mpiio_shared_values() -> None:
    result = parse_ior_json(load("mpiio_shared_2.json"))
    assert (result.api, result.layout, result.num_tasks) == ("MPIIO", "shared", 2)
    assert result.max_mib("write") == 1580.2405 and result.mean_mib("read") == 1215.5729


@pytest.mark.parametrize("name", ["error_missing_dir.json", "error_mpiio_missing_dir.json"])
def test_summary_cut_off_by_a_failed_run(name: str) -> None:
    with pytest.raises(ParseError, match=r"error_.*IOR stopped before its summary"):
        parse_ior_json(load(name), name)


def test_error_lines_of_a_failed_run() -> None:
    errors = ior_errors(load("error_missing_dir.out"))
    assert any(e.startswith("ERROR: open64(\"/tmp/ior-missing/testfile.0000000") for e in errors)
    assert any(e.startswith("Abort(-1)") for e in errors)
    assert ior_errors(load("posix_fpp_2.out")) == []


def test_summary_without_read_names_the_missing_operation() -> None:
    text = load("posix_shared_2_write_only.json")
    with pytest.raises(ParseError, match=r"no read operation \(has write\).*without -r"):
        parse_ior_json(text, "w.json")
    assert parse_ior_json(text, require=("write",)).max_mib("write") == 1487.6056


@pytest.mark.parametrize("text", ["", "garbage", "[1, 2]", '{"Version": "4.0.0"}',
                                  '{"summary": [{"operation": "write"}]}'])
def test_garbage(text: str) -> None:
    with pytest.raises(ParseError, match="g.json"):
        parse_ior_json(text, "g.json")


def test_truncated_anywhere() -> None:
    text = load("posix_shared_1.json")
    for cut in (len(text) // 4, len(text) // 2, len(text) - 40):
        with pytest.raises(ParseError):
            parse_ior_json(text[:cut], "t.json")


def test_verbose_text_output() -> None:
    result = parse_ior_text(load("posix_fpp_2_verbose.txt"))
    assert result["write"] == {"max": 1578.62, "min": 1466.20, "mean": 1522.41,
                               "stddev": 56.21, "max_line": 1578.62}
    assert result["read"]["max"] == 26710.00 and result["read"]["max_line"] == 26710.00


def test_text_output_truncated_or_failed() -> None:
    text = load("posix_fpp_2_verbose.txt")
    cut = text[:text.index("Summary of all tests")]
    with pytest.raises(ParseError, match="no 'Summary of all tests'"):
        parse_ior_text(cut, "cut.txt")
    row_cut = text[:text.index("read        26710")] + "read        26710.00   24695"
    with pytest.raises(ParseError, match="row cut off"):
        parse_ior_text(row_cut, "cut.txt")
    with pytest.raises(ParseError, match="IOR run failed: 'ERROR: open64"):
        parse_ior_text(load("error_missing_dir.out"), "err.out")


# --- several tests in one output (an IOR -f script with two RUN blocks) ---


def test_json_of_two_tests_keeps_each_test_apart() -> None:
    from hpcval.parsers.ior import parse_ior_json_tests

    text = load("script_two_tests.json")
    with pytest.raises(ParseError, match=r"2 tests \(TestID 0, 1\).*parse_ior_json_tests"):
        parse_ior_json(text, "s.json")
    tests = parse_ior_json_tests(text, "s.json")
    assert sorted(tests) == [0, 1]
    fpp, shared = tests[0], tests[1]
    assert (fpp.layout, fpp.transfer_size) == ("file-per-process", 1048576)
    assert (shared.layout, shared.transfer_size) == ("shared", 262144)
    assert fpp.max_mib("write") == 787.7136 and fpp.max_mib("read") == 11319.7038
    assert shared.max_mib("write") == 510.0969 and shared.max_mib("read") == 4334.218
    # each test's repetitions are its own
    assert fpp.op("write").repetitions_mib == (133.1397, 787.7136)
    assert shared.op("write").repetitions_mib == (506.9392, 510.0969)


def test_text_of_two_tests_keeps_each_max_line_with_its_test() -> None:
    from hpcval.parsers.ior import parse_ior_text_tests

    text = load("script_two_tests_verbose.txt")
    with pytest.raises(ParseError, match=r"2 tests \(Test# 0, 1\)"):
        parse_ior_text(text, "s.txt")
    tests = parse_ior_text_tests(text, "s.txt")
    assert tests[0]["write"] == {"max": 1959.84, "min": 905.72, "mean": 1432.78,
                                 "stddev": 527.06, "max_line": 1959.84}
    assert tests[1]["write"]["max"] == 956.08 and tests[1]["write"]["max_line"] == 956.08
    assert tests[1]["read"]["max_line"] == 13882.68
    assert tests[0]["read"]["max_line"] == 18181.76


def test_ior_4_0_verbose_json_of_two_tests_is_invalid_json() -> None:
    """IOR 4.0.0 with -v writes a JSON summary of a two-test script with a
    stray ']' (recorded as is): refused with IOR's line and column."""
    from hpcval.parsers.ior import parse_ior_json_tests

    with pytest.raises(ParseError, match=r"v.json: not an IOR JSON summary \(Expecting ',' "
                                         r"delimiter at line 140 column 1\)"):
        parse_ior_json_tests(load("script_two_tests_verbose_invalid.json"), "v.json")


@pytest.mark.parametrize("old, new, message", [
    ('"bwMaxMIB": 2083.4468', '"bwMaxMIB": Infinity', "not a finite number"),
    ('"numTasks": 2', '"numTasks": NaN', "not a finite number"),
    ('"TestID": 0', '"TestID": {"a": 1}', "TestID that is not a number"),
])
def test_json_values_that_are_not_finite_numbers(old: str, new: str, message: str) -> None:
    """Found by a structural mutation of the real summaries: Infinity/NaN (which
    Python's json accepts) and odd TestIDs were OverflowError/TypeError tracebacks."""
    from hpcval.parsers.ior import parse_ior_json_tests

    text = load("posix_fpp_2.json")
    assert old in text
    with pytest.raises(ParseError, match=message):
        parse_ior_json_tests(text.replace(old, new), "m.json")


@pytest.mark.parametrize("figure", ["1.2.3", "."])
def test_a_max_line_that_is_not_a_number_names_its_line(figure: str) -> None:
    """A corrupted ``Max Write:`` figure was a ValueError traceback."""
    from hpcval.parsers.ior import parse_ior_text_tests

    text = load("script_two_tests_verbose.txt")
    assert "\nMax Write: 1959.84 MiB/sec" in text
    broken = text.replace("Max Write: 1959.84", f"Max Write: {figure}")
    with pytest.raises(ParseError, match=rf"s.txt: line 47: not a number in 'Max Write: "
                                         rf"{figure.replace('.', '[.]')} MiB/sec"):
        parse_ior_text_tests(broken, "s.txt")


# --- several IOR runs appended in one output (each with its own banner and TestID 0) ---

APPENDED = "appended_runs_ior_3.3.out"


def test_appended_runs_are_read_as_separate_runs() -> None:
    """Ten IOR 3.3 runs (one per API and layout) appended to one job output by
    XDMoD's IOR application kernel (tests/data/ior/README.md): every run is
    its own, with its own summary and its own Max Write/Max Read lines."""
    from hpcval.parsers.ior import parse_ior_text_runs

    runs = parse_ior_text_runs(load(APPENDED), APPENDED)
    assert [r.line for r in runs] == [24, 77, 130, 183, 236, 289, 342, 395, 448, 501]
    assert all(sorted(r.tests) == [0] for r in runs)
    first, last = runs[0].tests[0], runs[-1].tests[0]
    assert runs[0].command_line is not None and runs[0].command_line.endswith(
        "-b 200m -t 20m -a POSIX -o /scratch/01482/xdtas/ior.9BzrhiNHI/ior_test_file__a_POSIX")
    assert "-a NCMPI -c" in str(runs[-1].command_line)
    # each run's own figures: its summary rows and its own Max lines
    assert first["write"] == {"max": 426.77, "min": 426.77, "mean": 426.77, "stddev": 0.0,
                              "max_line": 426.77}
    assert first["read"]["max"] == first["read"]["max_line"] == 332.55
    assert last["write"]["max"] == last["write"]["max_line"] == 229.05
    assert last["read"]["max"] == last["read"]["max_line"] == 240.25
    for run in runs:
        for op in ("write", "read"):
            assert run.tests[0][op]["max"] == run.tests[0][op]["max_line"]


def test_appended_runs_are_never_merged_by_the_one_run_readers() -> None:
    """The first run's summary with the last run's Max Write was read before;
    now the one-run readers refuse in one line naming the file and the way out."""
    from hpcval.parsers.ior import parse_ior_text_tests

    text = load(APPENDED)
    for reader in (parse_ior_text, parse_ior_text_tests):
        with pytest.raises(ParseError) as err:
            reader(text, APPENDED)
        message = str(err.value)
        assert "\n" not in message
        assert message.startswith(f"{APPENDED}: 10 IOR runs appended in one output (banners "
                                  "at lines 24, 77, 130")
        assert "parse_ior_text_runs" in message


def test_one_run_reads_the_same_as_one_run_of_several() -> None:
    """A file of one run is one run for parse_ior_text_runs; cutting a run out
    of the appended output reads what the run reader gives for it."""
    from hpcval.parsers.ior import parse_ior_text_runs

    single = parse_ior_text_runs(load("posix_fpp_2_verbose.txt"))
    assert len(single) == 1 and single[0].tests[0] == {0: parse_ior_text(
        load("posix_fpp_2_verbose.txt"))}[0]
    text = load(APPENDED)
    lines = text.splitlines(keepends=True)
    third = "".join(lines[129:182])  # run 3: its banner (line 130) to before run 4's
    assert parse_ior_text(third) == parse_ior_text_runs(text)[2].tests[0]


def test_a_failed_or_cut_run_among_appended_runs_names_the_run() -> None:
    from hpcval.parsers.ior import parse_ior_text_runs

    text = load(APPENDED)
    cut = text[:text.index("Summary of all tests", text.index("ior_test_file__a_MPIIO__c"))]
    with pytest.raises(ParseError, match=r"a.out \(run 4 of 4, banner at line 183\): no "
                                         r"'Summary of all tests'"):
        parse_ior_text_runs(cut, "a.out")
    row = "write         115.87     115.87"
    broken = text.replace(row, "write         115.x7     115.87")
    with pytest.raises(ParseError, match=r"run 4 of 10, banner at line 183\): line 228: "
                                         r"not a number in summary row"):
        parse_ior_text_runs(broken, "a.out")


def test_appended_json_summaries() -> None:
    """IOR JSON summaries written one after another (runs appended to one file):
    refused by the one-summary readers, read run by run by parse_ior_json_runs.
    Constructed from two real summaries of tests/data/ior."""
    from hpcval.parsers.ior import parse_ior_json_runs, parse_ior_json_tests

    fpp, shared = load("posix_fpp_2.json"), load("mpiio_shared_2.json")
    text = fpp + shared
    for reader in (parse_ior_json, parse_ior_json_tests):
        with pytest.raises(ParseError, match=r"^j.json: 2 IOR JSON summaries appended in one "
                                             r"file \(one per run\): read it with "
                                             r"parse_ior_json_runs"):
            reader(text, "j.json")
    runs = parse_ior_json_runs(text, "j.json")
    assert [r[0].layout for r in runs] == ["file-per-process", "shared"]
    assert runs[0][0].max_mib("write") == parse_ior_json(fpp).max_mib("write")
    assert runs[1][0].max_mib("read") == parse_ior_json(shared).max_mib("read")
    assert [list(r) for r in parse_ior_json_runs(fpp)] == [[0]]
    with pytest.raises(ParseError, match=r"j.json \(run 2 of 2\).*no read operation"):
        parse_ior_json_runs(fpp + load("posix_shared_2_write_only.json"), "j.json")


def test_appended_write_runs_then_read_runs() -> None:
    """Twenty IOR 3.2 runs in one output: ten writing, then ten reading their
    files back, each run with one operation of its own."""
    from hpcval.parsers.ior import parse_ior_text_runs

    name = "appended_runs_ior_3.2_write_then_read.out"
    runs = parse_ior_text_runs(load(name), name)
    assert len(runs) == 20 and (runs[0].line, runs[-1].line) == (21, 883)
    assert all(list(r.tests[0]) == ["write"] for r in runs[:10])
    assert all(list(r.tests[0]) == ["read"] for r in runs[10:])
    assert runs[0].tests[0]["write"]["max"] == runs[0].tests[0]["write"]["max_line"] == 91.52
    assert runs[10].tests[0]["read"]["max"] == 261.32
    assert "-a POSIX -r" in str(runs[10].command_line)
    with pytest.raises(ParseError, match=rf"^{name}: 20 IOR runs appended in one output"):
        parse_ior_text(load(name), name)
