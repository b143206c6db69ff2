"""An interrupted validation stops cleanly (docs/errors.md, hpcval.run.procs).

Real signals are sent to a real ``hpcval validate`` on the ``local`` site,
running Intel MPI Benchmarks with real launchers: during a benchmark (as soon
as an ``IMB-MPI1`` of the run exists), while the run is judged, while it is
stored (``HPCVAL_TEST_PAUSE`` holds hpcval at that point until the signal
comes). After each: exit 128 + N, no process of the run left, the site lock
free, the store consistent, the run stored as ``interrupted`` and never in a
baseline, and ``store rebuild`` keeps it so.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcval.run.procs import marked

from .conftest import BIN, make_checkout, run

pytestmark = pytest.mark.skipif(not (BIN / "IMB-MPI1").exists(),
                                reason="Intel MPI Benchmarks not installed (make setup)")

CHECK = "imb_pingpong_check"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A checkout of the local site with one recorded (accepted) run."""
    root = make_checkout(tmp_path_factory.mktemp("interrupt"))
    rec = run(root, "validate", "--site", "local", "--record", "--", "-n", CHECK)
    assert rec.returncode == 0, rec.output
    yield root


class Validation:
    """``hpcval validate`` started in the background, its output collected."""

    def __init__(self, root: Path, env: dict[str, str] | None = None) -> None:
        environ = {**os.environ, "HPCVAL_ROOT": str(root), **(env or {})}
        environ.pop("HPCVAL_VAR", None)
        self.proc = subprocess.Popen(
            [str(BIN / "hpcval"), "validate", "--site", "local", "--", "-n", CHECK],
            cwd=root, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, errors="replace")
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, what: str, timeout: float = 300) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(what, self.output)
            if m:
                return m
            assert self.proc.poll() is None, f"hpcval ended before {what!r}:\n{self.output}"
            time.sleep(0.1)
        raise AssertionError(f"no {what!r} in {timeout} s:\n{self.output}")

    @property
    def run_id(self) -> str:
        return self.wait_for(r"hpcval: run (\S+) on site").group(1)

    def benchmark_running(self, timeout: float = 300) -> list[int]:
        """Wait until an IMB-MPI1 of this run runs; the run's processes."""
        run_id, deadline = self.run_id, time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = marked(run_id)
            names = []
            for pid in pids:
                try:
                    names.append(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0])
                except OSError:
                    pass
            if any(n.endswith(b"IMB-MPI1") for n in names):
                return pids
            assert self.proc.poll() is None, self.output
            time.sleep(0.05)
        raise AssertionError(f"no IMB-MPI1 of run {run_id} in {timeout} s")

    def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=120)


def lock_free(root: Path) -> bool:
    fd = os.open(root / "var" / "local" / "validate.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def stored_run(root: Path, run_id: str) -> dict:
    res = run(root, "history", "--site", "local", "--json", "--last", "1000")
    assert res.returncode == 0, res.output
    return next(r for r in json.loads(res.stdout) if r["run_id"] == run_id)


def assert_stopped_cleanly(root: Path, run_id: str) -> None:
    assert marked(run_id) == [], "processes of the run outlived hpcval"
    assert lock_free(root)
    check = run(root, "store", "check", "--site", "local")
    assert check.returncode == 0, check.output
    row = stored_run(root, run_id)
    assert (row["result"], row["accepted"]) == ("interrupted", 0)
    sidecar = json.loads((root / "var" / "local" / "verdicts" / f"{run_id}.json").read_text())
    assert (sidecar["result"], sidecar["accepted"]) == ("interrupted", False)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT],
                         ids=lambda s: signal.Signals(s).name)
def test_a_signal_during_a_benchmark_stops_every_process_of_the_run(site: Path,
                                                                    sig: int) -> None:
    v = Validation(site)
    before = v.benchmark_running()
    assert len(before) >= 3  # ReFrame, the launcher, the benchmark's ranks
    started = time.monotonic()
    assert v.stop(sig) == 128 + sig, v.output
    print(f"{signal.Signals(sig).name}: {len(before)} processes of the run, hpcval exited "
          f"{time.monotonic() - started:.1f} s after the signal")
    assert_stopped_cleanly(site, v.run_id)
    if sig != signal.SIGHUP:  # a closed terminal reads nothing more
        assert f"stopped by {signal.Signals(sig).name}" in v.output
        assert "RESULT: INTERRUPTED" in v.output
        # the cases ReFrame aborted are not run, not failed
        report = json.loads((site / "var" / "local" / "reports" /
                             f"run-report-{v.run_id}.json").read_text())
        results = [tc["result"] for tc in report["runs"][-1]["testcases"]]
        line = next(ln for ln in v.output.splitlines() if "RESULT: INTERRUPTED" in ln)
        if "abort" in results:
            assert f"{results.count('abort')} not run (aborted by the stop)" in line, line
        assert f" {results.count('fail')} failed" in line, line


def test_a_signal_while_the_run_is_stored(site: Path) -> None:
    """ReFrame is done: the storing completes, then the run is marked (a
    signal while it is judged: the next test)."""
    v = Validation(site, {"HPCVAL_TEST_PAUSE": "storing"})
    v.wait_for("hpcval: paused at storing")
    assert v.stop(signal.SIGINT) == 130, v.output
    assert_stopped_cleanly(site, v.run_id)
    assert "RESULT: INTERRUPTED" in v.output, v.output
    report = json.loads((site / "var" / "local" / "reports" /
                         f"run-report-{v.run_id}.json").read_text())
    assert report["runs"][0]["testcases"]  # what finished is kept


def test_the_next_run_is_judged_against_accepted_runs_only(site: Path) -> None:
    """After interrupted runs (one with every figure measured, stopped while
    judged), a clean run's baseline is the one recorded run alone; an
    interrupted run cannot be accepted into baselines, and a rebuilt store
    keeps it interrupted."""
    v = Validation(site, {"HPCVAL_TEST_PAUSE": "judging"})
    v.wait_for("hpcval: paused at judging")
    assert v.stop(signal.SIGTERM) == 143, v.output
    full = v.run_id
    assert_stopped_cleanly(site, full)
    assert "RESULT: INTERRUPTED" in v.output, v.output
    clean = Validation(site)
    assert clean.proc.wait(timeout=900) in (0, 1), clean.output
    verdicts = json.loads((site / "var" / "local" / "verdicts" /
                           f"{clean.run_id}.json").read_text())["verdicts"]
    assert verdicts
    assert {d.get("baseline_runs") for _, _, _, d in verdicts} == {1}, verdicts
    refused = run(site, "history", "--site", "local", "--accept", full)
    assert refused.returncode == 2 and "interrupted" in refused.stderr, refused.output
    rebuilt = run(site, "store", "rebuild", "--site", "local")
    assert rebuilt.returncode == 0, rebuilt.output
    assert stored_run(site, full)["result"] == "interrupted"
    assert stored_run(site, full)["accepted"] == 0
