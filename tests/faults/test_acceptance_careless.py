"""``bench/acceptance/acceptance.py`` as a careless user runs it: an output
folder that is a file or cannot be written, a scratch folder that is a file, a
budget or parts that are none, a damaged offline folder, ``prepare`` pointed at
a folder it did not make. Each ends with one line and its exit code (2 a wrong
argument, 3 the machine: a folder that cannot be written, an install that
failed), no traceback, nothing of the user's removed (docs/performance.md,
"Run")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, TRACEBACK

pytestmark = pytest.mark.integration

ACCEPTANCE = ROOT / "bench" / "acceptance" / "acceptance.py"


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ACCEPTANCE), *args], text=True,
                          capture_output=True, timeout=timeout)


def _clean(proc: subprocess.CompletedProcess[str], code: int, *names: str) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode == code, out[-3000:]
    assert TRACEBACK not in out, out[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert line.endswith(f"exit {code}"), line
    for name in names:
        assert name in line, f"{name!r} not in {line!r}"
    return line


@pytest.fixture
def afile(tmp_path: Path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("kept\n")
    return path


def test_out_is_an_existing_file(tmp_path: Path, afile: Path) -> None:
    _clean(_run("run", "--out", str(afile), "--dry"), 2, "--out", str(afile), "a file")
    assert afile.read_text() == "kept\n"


def test_out_under_a_read_only_directory(tmp_path: Path, mount_tmpfs) -> None:  # noqa: ANN001
    readonly = mount_tmpfs("1m", readonly=True)
    _clean(_run("run", "--out", str(readonly / "acc"), "--dry"), 3, "--out",
           str(readonly / "acc"), "cannot write there")


def test_work_is_an_existing_file(tmp_path: Path, afile: Path) -> None:
    _clean(_run("run", "--out", str(tmp_path / "acc"), "--dry", "--work", str(afile)), 2,
           "--work", "a file")


@pytest.mark.parametrize("budget", ["-5", "0", "nan", "inf"])
def test_budget_that_is_no_time(tmp_path: Path, budget: str) -> None:
    _clean(_run("run", "--out", str(tmp_path / "acc"), "--dry", "--budget-s", budget), 2,
           "--budget-s")
    assert not (tmp_path / "acc" / "steps.json").exists(), "it ran"


def test_parts_that_are_none(tmp_path: Path) -> None:
    _clean(_run("run", "--out", str(tmp_path / "acc"), "--dry", "--parts", ""), 2, "--parts",
           "checks, gpu, verdict")
    assert not (tmp_path / "acc" / "steps.json").exists(), "it ran"


def _offline(tmp_path: Path, manifest: str, source: bytes) -> Path:
    offline = tmp_path / "offline"
    (offline / "wheels").mkdir(parents=True)
    (offline / "manifest.json").write_text(manifest)
    (offline / "hpcval-src.tar.gz").write_bytes(source)
    return offline


def test_truncated_source_archive(tmp_path: Path) -> None:
    """A folder carried in part: the install fails naming the archive, the
    summary is written, the run exits 3 (a traceback before)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar.gz",
                              "--prefix=hpcval/", "HEAD"], capture_output=True,
                             check=True).stdout
    offline = _offline(tmp_path, json.dumps({"intel_mpi": {"version": "x"}}),
                       archive[: len(archive) // 3])
    out = tmp_path / "acc"
    proc = _run("run", "--out", str(out), "--offline", str(offline), "--parts", "verdict",
                "--budget-s", "60")
    _clean(proc, 3, "install failed", "hpcval-src.tar.gz", "truncated")
    steps = json.loads((out / "steps.json").read_text())["steps"]
    assert steps[0]["name"] == "install" and steps[0]["exit_code"] == 3
    assert (out / "summary.md").is_file()


def test_manifest_that_is_not_json(tmp_path: Path) -> None:
    """The install failed and nothing ran: exit 3 (it exited 0)."""
    offline = _offline(tmp_path, "{not json", b"")
    out = tmp_path / "acc"
    proc = _run("run", "--out", str(out), "--offline", str(offline), "--parts", "verdict",
                "--budget-s", "60")
    _clean(proc, 3, "install failed", "JSONDecodeError")
    assert (out / "summary.md").is_file()


def test_prepare_never_empties_a_folder_it_did_not_make(tmp_path: Path) -> None:
    """``prepare --folder`` empties the folder first: a folder that is not one
    ``prepare`` made (no manifest.json) is refused, its files kept (it was
    removed whole, ``--folder ~`` the home directory)."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work\n")
    _clean(_run("prepare", "--folder", str(mine)), 2, "--folder", "not a folder `prepare` made",
           "nothing removed")
    assert (mine / "thesis.tex").read_text() == "years of work\n"


def test_prepare_folder_is_a_file(afile: Path) -> None:
    _clean(_run("prepare", "--folder", str(afile)), 2, "--folder", "a file")
    assert afile.read_text() == "kept\n"


def test_dry_run_is_still_fine(tmp_path: Path) -> None:
    """The control: a plan written, exit 0."""
    proc = _run("run", "--out", str(tmp_path / "acc"), "--dry")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert (tmp_path / "acc" / "steps.json").is_file()
