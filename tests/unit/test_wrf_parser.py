"""WRF rsl log parsing and figure of merit, on real logs of WRF 4.4.2 and 4.3.3
em_quarter_ss (gfortran 12, Open MPI 4.1, 2 ranks) in tests/data/wrf/."""

from __future__ import annotations

import statistics

import pytest

from hpcval.core.errors import ParseError
from hpcval.parsers import wrf


def _log(data_dir, name):
    path = data_dir / "wrf" / name
    return wrf.parse_wrf_log(path.read_text(), source=str(path))


def test_normal_run_with_history_spikes(data_dir):
    log = _log(data_dir, "quarter_ss_np2_hist2min_rsl.error.0000")
    wrf.check_complete(log, expected_steps=50)
    assert log.success and log.fatal is None
    assert log.time_step() == 12.0
    fig = wrf.figures(log)
    assert (fig.steps_total, fig.steps_output, fig.steps_used) == (50, 4, 45)
    assert fig.first_step == pytest.approx(1.95919)
    assert fig.mean_step == pytest.approx(0.4498847, rel=1e-6)
    assert fig.median_step == pytest.approx(0.43373)
    assert fig.speed == pytest.approx(12 / fig.mean_step)
    # the samples of the judged figures: one per steady step, first and output steps out
    assert len(fig.step_times) == len(fig.step_speeds) == 45
    assert statistics.median(fig.step_times) == pytest.approx(fig.median_step)
    assert statistics.median(fig.step_speeds) == pytest.approx(12 / fig.median_step)
    assert fig.first_step not in fig.step_times
    assert max(fig.step_times) == pytest.approx(fig.max_step)
    # Each history write is inside the step ending one time step after its file time.
    for step in log.steps:
        for w in step.writes:
            assert w.kind == "history"
            assert wrf.model_seconds(step.model_time) - wrf.model_seconds(w.model_time) == 12


def test_wrong_step_count_is_reported(data_dir):
    log = _log(data_dir, "quarter_ss_np2_hist2min_rsl.error.0000")
    with pytest.raises(ParseError, match="ran 50 time steps, expected 60"):
        wrf.check_complete(log, expected_steps=60)


def test_killed_run_is_truncated(data_dir):
    log = _log(data_dir, "quarter_ss_np2_killed_rsl.error.0000")
    assert not log.success
    with pytest.raises(ParseError, match="without 'SUCCESS COMPLETE WRF' after step 25 "
                                         r"\(model time 0001-01-01_00:05:00"):
        wrf.check_complete(log)


def test_fatal_error_names_file_and_line(data_dir):
    log = _log(data_dir, "quarter_ss_np2_no_wrfinput_rsl.error.0000")
    with pytest.raises(ParseError) as err:
        wrf.check_complete(log)
    msg = str(err.value)
    assert "error opening wrfinput_d01 for reading" in msg
    assert "FATAL CALLED FROM FILE <stdin> LINE 70" in msg


def test_garbage_is_not_a_wrf_log():
    with pytest.raises(ParseError, match="not a WRF rsl log"):
        wrf.parse_wrf_log("hello\nworld\n", source="x")


def test_cfl_crash_is_classified(data_dir):
    """A real run with time_step = 90 s (the case needs 12 s): vertical CFL
    warnings, then a segmentation fault after the first step."""
    log = wrf.parse_wrf_log((data_dir / "wrf" / "quarter_ss_np2_cfl_dt90_rsl.error.0000")
                            .read_text(), "rsl.error.0000")
    assert not log.success and log.fatal is None
    assert log.signal is not None and log.signal.startswith("SIGSEGV")
    assert [w[0] for w in log.cfl_warnings] == [656, 32434]
    with pytest.raises(ParseError) as err:
        wrf.check_complete(log)
    text = str(err.value)
    assert "WRF crashed (SIGSEGV" in text and "after step 1" in text
    assert "32434 points exceeded the vertical CFL limit" in text and "reduce time_step" in text


def test_run_length_from_start_and_end_dates(data_dir):
    """WRF's own test/em_real/namelist.input_1day sets every run_* to 0 and
    runs from start_* to end_*: one day of 120 s steps."""
    text = (data_dir / "wrf" / "namelist.input_1day_end_dates").read_text()
    assert wrf.namelist_value(text, "run_hours") == "0"
    assert wrf.start_time(text) == "1996-01-01_00:00:00"
    assert wrf.end_time(text) == "1996-01-02_00:00:00"
    assert wrf.run_seconds(text) == 86400
    assert wrf.expected_steps(text) == 720


def test_run_length_prefers_run_entries_and_refuses_no_length(data_dir):
    text = (data_dir / "wrf" / "namelist.input_1day_end_dates").read_text()
    six_hours = wrf.edit_namelist(text, {"run_hours": 6})
    assert wrf.run_seconds(six_hours) == 6 * 3600
    same_day = wrf.edit_namelist(text, {"end_day": 1})
    with pytest.raises(ParseError, match="end 1996-01-01_00:00:00 is not after start"):
        wrf.run_seconds(same_day)


@pytest.mark.parametrize("key, value", [("time_step", "''"), ("time_step", "nan"),
                                        ("end_day", "x2"), ("run_hours", "inf")])
def test_namelist_numbers_that_are_not_numbers(data_dir, key, value):
    """Found by the property test: a time step that is empty or not finite was a
    ValueError traceback; now a ParseError naming the key."""
    text = (data_dir / "wrf" / "namelist.input_1day_end_dates").read_text()
    broken = wrf.edit_namelist(text, {key: value})
    with pytest.raises(ParseError, match=f"namelist.input {key} is not a"):
        wrf.expected_steps(broken)


def test_end_dates_without_minutes_and_seconds(data_dir):
    """WRF's namelist.input_1day with its start/end minute and second lines left
    out (constructed, tests/data/wrf/README.md): WRF takes them as 00, so the
    run is still one day of 120 s steps."""
    text = (data_dir / "wrf" / "namelist.input_1day_no_minutes_seconds").read_text()
    assert "start_minute" not in text and "start_second" not in text
    assert wrf.start_time(text) == "1996-01-01_00:00:00"
    assert wrf.end_time(text) == "1996-01-02_00:00:00"
    assert wrf.run_seconds(text) == 86400
    assert wrf.expected_steps(text) == 720
    # an end minute given while the start's is left out: the start minute is 00
    half_past = wrf.edit_namelist(text, {"end_minute": 30}, group="time_control")
    assert wrf.end_time(half_past) == "1996-01-02_00:30:00"
    assert wrf.run_seconds(half_past) == 86400 + 1800
    assert wrf.expected_steps(half_past) == 735
    # run_* still win over the dates
    assert wrf.run_seconds(wrf.edit_namelist(text, {"run_hours": 6})) == 6 * 3600


def test_a_date_without_its_hour_is_refused_naming_the_file_and_key(data_dir):
    text = (data_dir / "wrf" / "namelist.input_1day_no_minutes_seconds").read_text()
    no_hour = "".join(ln for ln in text.splitlines(keepends=True)
                      if not ln.startswith(" start_hour"))
    with pytest.raises(ParseError) as err:
        wrf.run_seconds(no_hour, "case/namelist.input")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("case/namelist.input: sets no positive run_days/hours/minutes/"
                              "seconds and no usable start/end date: no start_hour:")
    assert "add start_hour to &time_control" in message
    with pytest.raises(ParseError, match=r"^n.input: no start_hour"):
        wrf.start_time(no_hour, "n.input")
