"""A validation killed with SIGKILL (``kill -9``, ``timeout`` without ``-k``,
an out-of-memory kill of hpcval): ReFrame, the launcher and the ranks run on
without it. The next validation finds the run in ``var/<site>/run.json``,
stops its processes before its own run starts (no two runs' ranks overlap,
checked with ``/proc`` by run id), says so, and stores the killed run as
``orphaned``, never accepted; ``store rebuild`` imports only runs hpcval
judged (docs/errors.md)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hpcval.run.procs import marked

from .conftest import BIN, CHECKS, OK_RUN, TRACEBACK, make_checkout, needs_impi, run

pytestmark = pytest.mark.integration


def _sleepers(run_id: str) -> list[int]:
    """The fake benchmark's ranks (``sleep``) of run *run_id*."""
    out = []
    for pid in marked(run_id):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"sleep"):
                out.append(pid)
        except OSError:
            pass
    return out


def _history(root: Path) -> dict[str, dict]:
    res = run(root, "history", "--site", "local", "--json", "--last", "1000")
    assert res.returncode == 0, res.output
    return {r["run_id"]: r for r in json.loads(res.stdout)}


def test_sigkill_then_next_validation_stops_the_orphan(tmp_path: Path) -> None:
    needs_impi()
    root = make_checkout(tmp_path)
    first = run(root, *OK_RUN)  # a store with one accepted run
    assert first.returncode == 0, first.output
    env = {**os.environ, "HPCVAL_ROOT": str(root)}
    env.pop("HPCVAL_VAR", None)
    proc = subprocess.Popen([str(BIN / "hpcval"), "validate", "--site", "local", "--", "-c",
                             str(CHECKS), "-n", "fake_orphan_check"], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    record = root / "var" / "local" / "run.json"
    deadline = time.monotonic() + 180
    killed = ""
    while time.monotonic() < deadline:
        try:
            killed = json.loads(record.read_text())["run_id"]
        except (OSError, ValueError, KeyError):
            killed = ""
        if killed and _sleepers(killed):
            break
        assert proc.poll() is None, "the validation ended before its benchmark ran"
        time.sleep(0.1)
    assert killed and _sleepers(killed), "the hanging benchmark never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    time.sleep(1)
    assert _sleepers(killed), "the fault did not happen: the ranks died with hpcval"
    res = run(root, *OK_RUN)
    assert res.returncode == 0, res.output
    assert TRACEBACK not in res.output
    said = [ln for ln in res.stderr.splitlines() if f"run {killed} outlived its hpcval" in ln]
    assert said and "stopped its" in said[0], res.stderr
    # said (and done) before the new run began
    assert res.stderr.index(said[0]) >= 0 and "hpcval: run " in res.stdout
    assert marked(killed) == [], "processes of the killed run outlived the next validation"
    new_id = res.stdout.split("hpcval: run ", 1)[1].split()[0]
    assert new_id != killed
    runs = _history(root)
    sidecar = json.loads((root / "var" / "local" / "verdicts" / f"{killed}.json").read_text())
    assert (sidecar["result"], sidecar["accepted"]) == ("orphaned", False)
    if killed in runs:  # ReFrame, stopped, wrote its report: stored, never accepted
        assert (runs[killed]["result"], runs[killed]["accepted"]) == ("orphaned", 0)
    refused = run(root, "history", "--site", "local", "--accept", killed)
    if killed in runs:
        assert refused.returncode == 2 and "orphaned" in refused.stderr, refused.output
    # a plain ReFrame report dropped among the run reports: listed, never imported
    reports = root / "var" / "local" / "reports"
    plain = reports / "run-report-20260101T000000Z-0a0b0c.json"
    shutil.copy(reports / f"run-report-{new_id}.json", plain)
    kept_before = set((root / "var" / "local").glob("history.sqlite.*"))
    rebuilt = run(root, "store", "rebuild", "--site", "local")
    assert rebuilt.returncode == 0, rebuilt.output
    assert f"skipped: {plain}: never judged by hpcval" in rebuilt.stdout, rebuilt.stdout
    # a healthy store is kept aside as .old, named
    (kept,) = set((root / "var" / "local").glob("history.sqlite.*")) - kept_before
    assert kept.name.endswith(".old") and f"previous store (healthy) kept as {kept}" in \
        rebuilt.stdout
    after = _history(root)
    assert "20260101T000000Z-0a0b0c" not in after
    assert after[new_id]["accepted"] == 1
    if killed in after:
        assert (after[killed]["result"], after[killed]["accepted"]) == ("orphaned", 0)
    assert set(after) == set(runs)


def test_rebuild_skips_a_report_whose_hpcval_died(tmp_path: Path) -> None:
    """A run report without hpcval's verdicts (as a run left behind by a
    killed hpcval writes it, minutes later): listed by ``store rebuild``,
    never imported; ``store rebuild`` itself settles the run left in
    ``run.json`` (marked orphaned)."""
    needs_impi()
    root = make_checkout(tmp_path)
    res = run(root, *OK_RUN)
    assert res.returncode == 0, res.output
    var = root / "var" / "local"
    (report,) = (var / "reports").glob("run-report-*.json")
    late = var / "reports" / "run-report-20260102T000000Z-0d0e0f.json"
    shutil.copy(report, late)
    (var / "run.json").write_text(json.dumps({"run_id": "20260102T000000Z-0d0e0f",
                                              "hpcval_pid": 999999999, "pgid": None,
                                              "host": os.uname().nodename}))
    rebuilt = run(root, "store", "rebuild", "--site", "local")
    assert rebuilt.returncode == 0, rebuilt.output
    assert "run 20260102T000000Z-0d0e0f outlived its hpcval" in rebuilt.stderr
    assert not (var / "run.json").exists()
    runs = _history(root)
    assert (runs["20260102T000000Z-0d0e0f"]["result"],
            runs["20260102T000000Z-0d0e0f"]["accepted"]) == ("orphaned", 0)


@pytest.mark.parametrize("lasts, wait, said", [
    (25, 90, "its processes ended on their own"),
    (300, 4, "stopped its 1 process(es) still running"),
], ids=["ends-in-time", "stopped-after-the-wait"])
def test_earlier_run_waited_for_with_lock_timeout(tmp_path: Path, lasts: int, wait: int,
                                                  said: str) -> None:
    """`--earlier-run wait`: a process of a run whose hpcval died (here a
    real process carrying that run's id) is given --lock-timeout seconds to
    end, saying so; what is left then is stopped; the run is orphaned."""
    needs_impi()
    root = make_checkout(tmp_path)
    var = root / "var" / "local"
    var.mkdir(parents=True)
    dead = "20260103T000000Z-0a1b2c"
    left = subprocess.Popen(["sleep", str(lasts)], env={**os.environ, "HPCVAL_RUN_ID": dead})
    try:
        (var / "run.json").write_text(json.dumps({"run_id": dead, "hpcval_pid": 999999999,
                                                  "pgid": None,
                                                  "host": os.uname().nodename}))
        res = run(root, "validate", "--site", "local", "--earlier-run", "wait",
                  "--lock-timeout", str(wait), "--", "-c", str(CHECKS), "-n",
                  "fake_imb_check.*mode=ok$")
    finally:
        left.kill()
        left.wait()
    assert res.returncode == 0, res.output
    assert f"run {dead} of an hpcval that died (pid 999999999) still has 1 process(es) " \
        f"running: waiting up to {wait} s" in res.stderr, res.stderr
    assert said in res.stderr, res.stderr
    assert marked(dead) == []
    sidecar = json.loads((var / "verdicts" / f"{dead}.json").read_text())
    assert (sidecar["result"], sidecar["accepted"]) == ("orphaned", False)
