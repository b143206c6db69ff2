"""ReFrame's start log (``rfm-*.log``, made in the temp directory before the
site config is read, never removed by ReFrame) is made in the run's log
directory from its first byte: a validation killed with SIGKILL, or one a full
disk cut short, left it in the system's temp directory. The jobs still see the
host's own ``TMPDIR`` (:func:`hpcval.core.paths.start_log_environment`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import BIN, CHECKS, OK_RUN, make_checkout, needs_impi, run

pytestmark = pytest.mark.integration


def _start_logs(directory: Path, config: Path) -> list[Path]:
    """``rfm-*.log`` files in *directory* that logged reading *config*."""
    needle = f"Loading configuration file: '{config}'"
    return [p for p in directory.glob("rfm-*.log")
            if needle in p.read_text(errors="replace")]


def test_start_log_kept_and_jobs_see_the_hosts_tmpdir(tmp_path: Path) -> None:
    needs_impi()
    root = make_checkout(tmp_path)
    systmp = tmp_path / "systmp"
    systmp.mkdir()
    res = run(root, "validate", "--site", "local", "--", "-c", str(CHECKS),
              "-n", "fake_imb_check.*mode=ok-env$", "-S", "env_vars=PROBE_TMP:$TMPDIR",
              env={"TMPDIR": str(systmp)})
    assert res.returncode == 0, res.output
    run_id = res.stdout.split("hpcval: run ", 1)[1].split()[0]
    config = root / "site-configs" / "local" / "config.py"
    assert _start_logs(systmp, config) == []
    logs = root / "var" / "local" / "logs"
    assert (logs / f"{run_id}.reframe-start.log").is_file(), sorted(logs.iterdir())
    assert list(logs.glob("rfm-*.log")) == []
    outputs = list((root / "var" / "local" / "output" / run_id).rglob("rfm_job.out"))
    probed = [ln for p in outputs for ln in p.read_text().splitlines()
              if ln.startswith("# env: PROBE_TMP=")]
    assert probed == [f"# env: PROBE_TMP={systmp}"], probed


def test_sigkilled_validation_leaves_no_start_log_in_the_temp_directory(
        tmp_path: Path) -> None:
    needs_impi()
    root = make_checkout(tmp_path)
    systmp = tmp_path / "systmp"
    systmp.mkdir()
    env = {**os.environ, "HPCVAL_ROOT": str(root), "TMPDIR": str(systmp)}
    env.pop("HPCVAL_VAR", None)
    proc = subprocess.Popen([str(BIN / "hpcval"), "validate", "--site", "local", "--", "-c",
                             str(CHECKS), "-n", "fake_orphan_check"], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    config = root / "site-configs" / "local" / "config.py"
    logs = root / "var" / "local" / "logs"
    record = root / "var" / "local" / "run.json"
    started = False
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                started = bool(json.loads(record.read_text()).get("pgid")) and bool(
                    _start_logs(logs, config) or _start_logs(systmp, config))
            except (OSError, ValueError):
                started = False
            if started:
                break
            assert proc.poll() is None, "the validation ended before ReFrame started"
            time.sleep(0.1)
        assert started, "ReFrame never started"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert _start_logs(systmp, config) == [], "ReFrame's start log is in the temp directory"
        assert _start_logs(logs, config), sorted(logs.iterdir())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        # the next validation stops what the killed one left running
        res = run(root, *OK_RUN, env={"TMPDIR": str(systmp)})
    assert res.returncode == 0, res.output


def test_disk_full_validation_leaves_no_start_log_in_the_temp_directory(
        tmp_path: Path, mount_tmpfs) -> None:  # noqa: ANN001
    """The results store's disk fills during the run: the start log, made
    there, is kept there (renamed in place, which needs no space); it was
    moved there at the end, which a full disk refused, and left in the
    system's temp directory."""
    root = make_checkout(tmp_path)
    fs = mount_tmpfs("72m")
    systmp = tmp_path / "systmp"
    systmp.mkdir()
    res = run(root, "validate", "--site", "local", "--", "-c", str(CHECKS),
              "-n", "fake_disk_fill_check", env={"HPCVAL_VAR": str(fs), "TMPDIR": str(systmp)})
    assert res.returncode == 3, res.output
    config = root / "site-configs" / "local" / "config.py"
    assert _start_logs(systmp, config) == []
    kept = list((fs / "local" / "logs").glob("*.reframe-start.log"))
    assert kept and f"Loading configuration file: '{config}'" in kept[0].read_text()
