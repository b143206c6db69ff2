"""Benchmarks that fail: fake IMB runs (tests/faults/bin/fake-imb) judged by
real ReFrame on the `local` site with real MPI launchers, all in one
``hpcval validate`` run. Each must FAIL naming its cause; none may pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import CHECKS, TRACEBACK, Result, needs_impi, report_cases, run

pytestmark = pytest.mark.integration

#: mode -> (phase the case fails in, words its failure reason must hold)
EXPECTED: dict[str, tuple[str, list[str]]] = {
    # a complete table, then the job ends badly: never a PASS
    "crash-after-table": ("sanity", ["exit code 255", "rank 1", "SIGSEGV"]),
    "exit1-after-table": ("sanity", ["fake-imb ended with exit code 1",
                                      "1 later launch(es) of the job skipped"]),
    "exit255-after-table": ("sanity", ["exit code 255", "stderr: fatal: rank 0 aborted"]),
    "segv-after-table": ("sanity", ["exit code 255", "SIGSEGV"]),
    "rank-exit1": ("sanity", ["exit code 1"]),
    # output that is not a result
    "garbage": ("sanity", ["rfm_job.out", "no IMB result table found"]),
    "binary": ("sanity", ["rfm_job.out", "no IMB result table found"]),
    "empty": ("sanity", ["rfm_job.out", "no IMB result table found"]),
    "stderr-only": ("sanity", ["exit code 127", "libmpi.so.12"]),
    "truncated": ("sanity", ["no row for 2048 B"]),
    "time-out-rows": ("sanity", ["1048576 B not measured: time-out"]),
    "out-of-mem-rows": ("sanity", ["4194304 B not measured: out-of-mem"]),
    # a hang: ended by the time limit, named as such
    "hang": ("run", ["timed out"]),
    # figures that cannot be measurements
    "inf": ("performance", ["bw_1MiB = inf MB/s is not finite"]),
    "nan": ("performance", ["lat_0B = nan us is not finite"]),
    "negative": ("performance", ["lat_8B = -0.39 us is negative"]),
    "above-ceiling": ("performance", ["bw_4MiB = 9e+12 MB/s is above the ceiling",
                                      "max_bandwidth_mbs"]),
}

#: environment -> words naming a rank killed by SIGKILL while rank 0 ran
RANK_DEATH = {
    # each rank is a script: rank 1's exit (137) is not in hydra's output, only
    # its clean-up of rank 0 (SIGTERM, I_MPI_JOB_ABORT_SIGNAL), never blamed
    "impi": ["exit code 255", "rank 0 on", "ended by hydra (SIGTERM) after another rank"],
    "openmpi": ["exit code 137", "128+9: killed by SIGKILL", "rank 1"],
    "mpich": ["exit code 9", "SIGKILL"],
}


@pytest.fixture(scope="module")
def fake_run(module_checkout: Path) -> tuple[Result, dict[str, dict]]:
    needs_impi()
    res = run(module_checkout, "validate", "--site", "local", "--", "-c", str(CHECKS),
              "-n", "fake_imb_check", "-n", "fake_rank_death_check")
    reports = sorted((module_checkout / "var" / "local" / "reports").glob("run-report-*.json"))
    assert reports, res.output
    return res, report_cases(reports[-1])


def _case(cases: dict[str, dict], mode: str) -> dict:
    key = f"fake_imb_check %cache=warm %mode={mode}+impi"
    assert key in cases, sorted(cases)
    return cases[key]


def test_run_fails_without_traceback(fake_run: tuple[Result, dict[str, dict]]) -> None:
    res, cases = fake_run
    assert res.returncode == 1, res.output
    assert TRACEBACK not in res.output
    assert "FAIL" in res.stdout
    # every case that failed before its figures shows one line with phase and cause
    table = res.stdout.split("Failures:")[0]
    assert " ?" not in table, table


def test_control_case_passes(fake_run: tuple[Result, dict[str, dict]]) -> None:
    """The fake itself is sound: its complete table, exit 0, passes."""
    _, cases = fake_run
    tc = _case(cases, "ok")
    assert tc["result"] == "pass", tc["fail_reason"]


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_fault_fails_named(fake_run: tuple[Result, dict[str, dict]], mode: str) -> None:
    res, cases = fake_run
    tc = _case(cases, mode)
    phase, words = EXPECTED[mode]
    assert tc["result"] == "fail", f"{mode}: {tc['result']}"
    assert tc["fail_phase"] == phase, tc["fail_reason"]
    for word in words:
        assert word in tc["fail_reason"], f"{mode}: {word!r} not in {tc['fail_reason']!r}"
    # the verdict names it too, in one line
    assert f"%mode={mode} (default+impi): {phase}:" in res.stdout


@pytest.mark.parametrize("environ", sorted(RANK_DEATH))
def test_rank_killed_ends_job_and_is_named(fake_run: tuple[Result, dict[str, dict]],
                                           environ: str) -> None:
    """Rank 1 is killed with SIGKILL while rank 0 would run for minutes: the
    launcher ends the job at once (the case fails in sanity, not by its 30 s
    time limit) and the reason names the signal."""
    _, cases = fake_run
    key = f"fake_rank_death_check %cache=warm+{environ}"
    if key not in cases:
        pytest.skip(f"no {environ} environment on this machine")
    tc = cases[key]
    assert tc["result"] == "fail"
    assert tc["fail_phase"] == "sanity", tc["fail_reason"]
    for word in RANK_DEATH[environ]:
        assert word in tc["fail_reason"], f"{word!r} not in {tc['fail_reason']!r}"


def test_every_launch_recorded(fake_run: tuple[Result, dict[str, dict]]) -> None:
    """The launch wrapper recorded how each launch ended (the record a
    complete-table crash is caught by)."""
    _, cases = fake_run
    tc = _case(cases, "exit1-after-table")
    status = Path(tc["stagedir"] or tc["outputdir"]) / "hpcval-launch-status"
    if not status.exists():
        status = Path(tc["outputdir"]) / "hpcval-launch-status"
    # the first of the job's two launches (samples = 2) failed: the second
    # was skipped, not run
    assert status.read_text().split() == ["start", "end", "1", "skip"]


def test_html_report_written_for_impossible_figures(
        fake_run: tuple[Result, dict[str, dict]], module_checkout: Path) -> None:
    res, _ = fake_run
    html = module_checkout / "var" / "local" / "html" / "latest.html"
    assert html.is_file()
    text = html.read_text()
    assert "lat_8B = -0.39 us is negative" in text


def test_failed_run_is_stored(fake_run: tuple[Result, dict[str, dict]],
                              module_checkout: Path) -> None:
    """A failed run is kept: its report and its place in the store."""
    res, _ = fake_run
    run_id = next(w for w in res.stdout.split() if w.count("T") == 1 and "Z-" in w)
    store = run(module_checkout, "history", "--site", "local")
    assert TRACEBACK not in store.output
    reports = list((module_checkout / "var" / "local" / "reports").glob(f"*{run_id}*.json"))
    assert reports and json.loads(reports[0].read_text())["runs"]
