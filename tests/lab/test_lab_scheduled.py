"""Scheduled validation: the wrapper's status lines, exit codes and messages,
and (on a real lab) a self-resubmitting Slurm job that fires without anyone."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hpcval.core.paths import project_root
from hpcval.lab import cluster

from .conftest import lab_missing_reason

SCHEDULED = project_root() / "site-configs" / "lab" / "scheduled"
WRAPPER = SCHEDULED / "hpcval-scheduled.sh"

FAKE_HPCVAL = """#!/bin/sh
# stands in for `hpcval validate`: prints a verdict and exits as told
echo "args: $*"
sleep "${FAKE_SLEEP:-0}"
if [ "${FAKE_RC:-0}" = 0 ]; then
  echo "2 passed, 0 failed, 0 skipped: PASS"
else
  echo "  imb_pingpong_internode_check (impi): bw_4MiB = 118.1 MB/s is outside >= 300.0 \
(reference 1,200)"
  echo "Failures:"
  echo "  imb_uniband_internode_check %cache=warm (lab+impi): run: job error: time limit \
reached: Slurm cancelled the job (TIMEOUT)"
  echo "1 passed, 2 failed, 0 skipped: FAIL"
fi
exit "${FAKE_RC:-0}"
"""


def _fake(tmp_path: Path) -> Path:
    fake = tmp_path / "fake-hpcval"
    fake.write_text(FAKE_HPCVAL)
    fake.chmod(0o755)
    return fake


def _run(tmp_path: Path, rc: int, sleep: float = 0) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HPCVAL": str(_fake(tmp_path)),
           "HPCVAL_VAR": str(tmp_path / "var"), "FAKE_RC": str(rc), "FAKE_SLEEP": str(sleep)}
    return subprocess.run([str(WRAPPER), "lab", "--tag", "internode"], env=env, cwd="/",
                          capture_output=True, text=True, timeout=60, check=False)


def test_passing_run_is_silent_and_recorded(tmp_path: Path) -> None:
    proc = _run(tmp_path, 0)
    assert proc.returncode == 0
    assert proc.stdout == "" and proc.stderr == ""
    store = tmp_path / "var" / "lab" / "scheduled"
    last = (store / "last").read_text()
    assert last.startswith("PASS ") and "site=lab exit=0 2 passed, 0 failed" in last
    log = Path(last.split("log=")[1].strip())
    assert "args: validate --site lab -- --tag internode" in log.read_text()


def test_failing_run_says_what_failed_and_exits_non_zero(tmp_path: Path) -> None:
    _run(tmp_path, 0)
    proc = _run(tmp_path, 1)
    assert proc.returncode == 1
    assert "hpcval scheduled validation of 'lab' FAILED" in proc.stderr
    assert "bw_4MiB = 118.1 MB/s is outside >= 300.0" in proc.stderr
    # a check that failed before its figures (a crash, a time limit) is named too
    assert ("imb_uniband_internode_check %cache=warm (lab+impi): run: job error: time limit "
            "reached") in proc.stderr
    store = tmp_path / "var" / "lab" / "scheduled"
    history = (store / "history").read_text().splitlines()
    assert [h.split()[0] for h in history] == ["PASS", "FAIL"]
    assert (store / "last").read_text().startswith("FAIL ")


def test_a_regressed_run_says_what_regressed(tmp_path: Path) -> None:
    """Every case passed its band but a figure regressed against its history
    (exit 1): the message names the figure, not only ReFrame's count."""
    fake = tmp_path / "fake-hpcval"
    fake.write_text("#!/bin/sh\n"
                    "echo 'RESULT: FAIL  0 failed, 1 regressed, 0 unstable of 2 figures (run x)'\n"
                    "echo '2 passed, 0 failed, 0 skipped: PASS'\n"
                    "echo 'REGRESSED imb_pingpong_check %cache=warm@lab:nodes+impi bw_1MiB: "
                    "1,020 -> 727 MB/s, -28.9 % [-30.3 .. -27.4] (90 %), p=2.7e-08'\n"
                    "exit 1\n")
    fake.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HPCVAL": str(fake), "HPCVAL_VAR": str(tmp_path / "var")}
    proc = subprocess.run([str(WRAPPER), "lab"], env=env, cwd="/", capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert "RESULT: FAIL  0 failed, 1 regressed" in proc.stderr
    assert "REGRESSED imb_pingpong_check %cache=warm@lab:nodes+impi bw_1MiB: 1,020 -> 727" \
        in proc.stderr


def test_overlapping_run_is_skipped_visibly(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HPCVAL": str(_fake(tmp_path)),
           "HPCVAL_VAR": str(tmp_path / "var"), "FAKE_SLEEP": "3"}
    first = subprocess.Popen([str(WRAPPER), "lab"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    second = _run(tmp_path, 0)
    first.communicate(timeout=30)
    assert second.returncode == 75
    assert "previous run still running" in second.stderr
    assert first.returncode == 0
    history = (tmp_path / "var" / "lab" / "scheduled" / "history").read_text()
    assert [h.split()[0] for h in history.splitlines()] == ["SKIP", "PASS"]


def test_missing_hpcval_is_a_visible_failure(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HPCVAL": str(tmp_path / "nope"),
           "HPCVAL_VAR": str(tmp_path / "var")}
    proc = subprocess.run([str(WRAPPER), "lab"], env=env, capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode == 127
    assert "could not start" in proc.stderr


@pytest.mark.lab
def test_recurring_slurm_job_fires_again_by_itself(tmp_path: Path) -> None:
    reason = lab_missing_reason()
    if reason:
        pytest.skip(reason)
    cluster.up(2, service=True, log=lambda *_: None)
    try:
        (tmp_path / "var" / "lab" / "scheduled").mkdir(parents=True)
        env = {**os.environ, "HPCVAL": str(_fake(tmp_path)), "HPCVAL_VAR": str(tmp_path / "var"),
               "HPCVAL_EVERY": "now+5", "FAKE_RC": "1"}
        sub = subprocess.run(["sbatch", "--parsable", str(SCHEDULED / "validate.sbatch")],
                             env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30,
                             check=False)
        assert sub.returncode == 0, sub.stderr
        first = sub.stdout.strip().split(";")[0]
        history = tmp_path / "var" / "lab" / "scheduled" / "history"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if history.exists() and len(history.read_text().splitlines()) >= 2:
                break
            time.sleep(1)
        subprocess.run(["scancel", "--name=hpcval-validate"], timeout=30, check=False)
        lines = history.read_text().splitlines()
        # the second run was queued by the first, not by this test
        assert len(lines) >= 2, lines
        assert all(ln.startswith("FAIL ") and "exit=1" in ln for ln in lines[:2])
        show = subprocess.run(["scontrol", "show", "job", first], capture_output=True,
                              text=True, timeout=30, check=False).stdout
        assert "JobState=FAILED" in show and "ExitCode=1:0" in show
        out = (tmp_path / "var" / "lab" / "scheduled" / f"slurm-{first}.out").read_text()
        assert "FAILED" in out and "bw_4MiB = 118.1 MB/s is outside" in out
    finally:
        cluster.down(log=lambda *_: None)


@pytest.mark.lab
def test_scheduled_slurm_job_runs_the_real_checks_and_stores_results(tmp_path: Path) -> None:
    """A batch job on the service node runs the real validation; its results land
    in the results store without anyone running a command on the nodes."""
    reason = lab_missing_reason()
    if reason:
        pytest.skip(reason)
    cluster.up(2, service=True, log=lambda *_: None)
    try:
        store = tmp_path / "var" / "lab"
        (store / "scheduled").mkdir(parents=True)
        env = {**os.environ, "HPCVAL_VAR": str(tmp_path / "var"), "HPCVAL_ONCE": "1"}
        env.pop("HPCVAL", None)
        sub = subprocess.run(["sbatch", "--parsable", str(SCHEDULED / "validate.sbatch")],
                             env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30,
                             check=False)
        assert sub.returncode == 0, sub.stderr
        last = store / "scheduled" / "last"
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not last.exists():
            time.sleep(2)
        assert last.exists(), "the scheduled run did not finish within 10 minutes"
        line = last.read_text()
        assert line.startswith("PASS ") and "2 passed, 0 failed" in line, line
        assert list((store / "reports").glob("run-report-*.json"))
        assert (store / "html" / "latest.html").is_file()
        assert (store / "history.sqlite").is_file()
    finally:
        subprocess.run(["scancel", "--name=hpcval-validate"], timeout=30, check=False)
        cluster.down(log=lambda *_: None)


FORWARDING_HPCVAL = """#!/bin/sh
# stands in for `hpcval validate`: a long run that says which signal stopped it
trap 'echo "stopped by TERM"; exit 143' TERM
echo "args: $*"
sleep 60 &
wait
"""


def test_a_stop_from_outside_reaches_hpcval_and_is_recorded(tmp_path: Path) -> None:
    """`timeout`/`systemctl stop` signal the wrapper: hpcval gets the signal
    (to stop its run cleanly), the run is recorded INTERRUPTED with its exit."""
    fake = tmp_path / "fake-hpcval"
    fake.write_text(FORWARDING_HPCVAL)
    fake.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HPCVAL": str(fake), "HPCVAL_VAR": str(tmp_path / "var")}
    proc = subprocess.Popen([str(WRAPPER), "lab"], env=env, cwd="/", text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    store = tmp_path / "var" / "lab" / "scheduled"
    deadline = time.monotonic() + 30
    while not any("args:" in p.read_text() for p in store.glob("*.log")):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    last = (store / "last").read_text()
    assert last.startswith("INTERRUPTED ") and "exit=143" in last, last
    log = Path(last.split("log=")[1].strip())
    assert "stopped by TERM" in log.read_text()
