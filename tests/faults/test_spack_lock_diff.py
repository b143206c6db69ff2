"""``hpcval spack lock --diff`` as a careless reviewer runs it: a file that is no lock, a
lock cut short, a directory, the flag without its partner, an environment never locked,
and no Spack for a re-lock. Each ends with the documented exit code (2 wrong input, 3 no
Spack), one line naming the file or flag, no traceback, and the environment's lock
unchanged byte for byte. The comparison itself runs on copies of the committed
onprem-ib lock: against itself and a header-only copy (exit 0), against a copy with one
version changed (exit 1, that change named). No Spack needed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hpcval.spack import builds

from .conftest import ROOT, Result, assert_clean_failure, run, run_inprocess

pytestmark = pytest.mark.integration

ENV = "onprem-ib"


@pytest.fixture
def envs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of environments/ (the relative includes resolve), SPACK_ROOT unset."""
    shutil.copytree(ROOT / "environments", tmp_path / "environments",
                    ignore=shutil.ignore_patterns(".spack-env"))
    for name in ("spack-repo", "proxies", "site-configs", "reframe-checks"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.delenv("SPACK_ROOT", raising=False)
    return tmp_path / "environments"


def _diff(envs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
          *args: str) -> Result:
    return run_inprocess(envs.parent, "spack", "lock", *args, monkeypatch=monkeypatch,
                         capsys=capsys)


def _copy(envs: Path, name: str, edit: object = None, text: str | None = None) -> Path:
    """The committed lock of ENV, edited by *edit* (a function of the lock) or replaced
    by *text*, written beside the environments."""
    path = envs.parent / name
    if text is not None:
        path.write_text(text)
        return path
    lock = json.loads((envs / ENV / "spack.lock").read_text())
    if callable(edit):
        edit(lock)
    path.write_text(json.dumps(lock, separators=(",", ":")))
    return path


def _header_only(lock: dict) -> None:
    lock["spack"] = {"version": lock["spack"]["version"], "type": "release"}


def _hwloc_version(lock: dict) -> None:
    for node in lock["concrete_specs"].values():
        if node["name"] == "hwloc":
            node["version"] = "2.12.0"


def test_against_itself_through_the_command(envs: Path) -> None:
    """The real ``hpcval`` binary: exit 0, one closing line."""
    lock = envs / ENV / "spack.lock"
    res = run(envs.parent, "spack", "lock", "--env", str(envs / ENV), "--diff",
              "--against", str(lock), env={"SPACK_ROOT": ""}, timeout=120)
    assert res.returncode == 0, res.output
    assert res.stdout.splitlines()[-1].startswith("0 spec changes"), res.stdout


def test_a_header_only_copy_is_no_spec_change(envs: Path, monkeypatch, capsys) -> None:
    before = (envs / ENV / "spack.lock").read_bytes()
    res = _diff(envs, monkeypatch, capsys, "--env", str(envs / ENV), "--diff", "--against",
                str(_copy(envs, "release.lock", _header_only)))
    assert res.returncode == 0, res.output
    lines = res.stdout.splitlines()
    assert "header (not a spec change, no part of any hash): spack type: git -> release" \
        in lines
    assert lines[-1].startswith("0 spec changes") and "the header differs" in lines[-1]
    assert (envs / ENV / "spack.lock").read_bytes() == before


def test_one_version_changed_is_named_exit_1(envs: Path, monkeypatch, capsys) -> None:
    res = _diff(envs, monkeypatch, capsys, "--env", str(envs / ENV), "--diff", "--against",
                str(_copy(envs, "hwloc.lock", _hwloc_version)))
    assert res.returncode == 1, res.output
    changed = [ln for ln in res.stdout.splitlines() if ln.startswith("changed")]
    assert len(changed) == 1 and changed[0].startswith("changed: hwloc@2.13.0/")
    assert "version 2.13.0 -> 2.12.0" in changed[0]
    assert res.stdout.splitlines()[-1].startswith("1 spec changes")


@pytest.mark.parametrize(("against", "says"), [
    ("missing.lock", "no such file"),
    ("adir", "not a file"),
    ("cut.lock", "not valid JSON"),
    ("manifest.yaml", "not valid JSON"),
    ("empty-object.lock", '"file-type": "spack-lockfile"'),
    ("spec.json", '"file-type": "spack-lockfile"'),
    ("huge.lock", "larger than the 64 MiB"),
], ids=["missing", "a-directory", "cut-short", "yaml", "empty-object", "a-spec-json", "huge"])
def test_against_a_file_that_is_no_lock(envs: Path, monkeypatch, capsys, against: str,
                                        says: str) -> None:
    committed = (envs / ENV / "spack.lock").read_bytes()
    (envs.parent / "adir").mkdir()
    (envs.parent / "cut.lock").write_bytes(committed[:4096])
    shutil.copy(envs / ENV / "spack.yaml", envs.parent / "manifest.yaml")
    (envs.parent / "empty-object.lock").write_text("{}")
    (envs.parent / "spec.json").write_text(json.dumps(
        {"spec": {"_meta": {"version": 5}, "nodes": [{"name": "ior", "version": "4.0.0"}]}}))
    with (envs.parent / "huge.lock").open("wb") as huge:  # sparse: no disk used
        huge.truncate(65 * 2**20)
    path = envs.parent / against
    res = _diff(envs, monkeypatch, capsys, "--env", str(envs / ENV), "--diff", "--against",
                str(path))
    assert_clean_failure(res, 2, str(path), says)
    assert (envs / ENV / "spack.lock").read_bytes() == committed


def test_the_environment_lock_is_no_lock(envs: Path, monkeypatch, capsys) -> None:
    lock = envs / ENV / "spack.lock"
    lock.write_bytes(lock.read_bytes()[:1000])
    res = _diff(envs, monkeypatch, capsys, "--env", str(envs / ENV), "--diff", "--against",
                str(_copy(envs, "x.lock", text="{}")))
    assert_clean_failure(res, 2, str(lock), "not valid JSON", f"hpcval spack lock --env {ENV}")


def test_an_environment_never_locked(envs: Path, monkeypatch, capsys) -> None:
    (envs / ENV / "spack.lock").unlink()
    res = _diff(envs, monkeypatch, capsys, "--env", str(envs / ENV), "--diff")
    assert_clean_failure(res, 2, "spack.lock: missing", f"hpcval spack lock --env {ENV}")
    assert not (envs / ENV / "spack.lock").exists()


@pytest.mark.parametrize(("args", "names"), [
    (("--against", "x.lock"), ("--against", "only with --diff")),
    (("--diff",), ("--diff", "--env E")),
    (("--env", ENV, "--env", "gcp-c2-impi", "--diff", "--against", "x.lock"),
     ("--against", "exactly one --env")),
    (("--env", "no-such-env", "--diff"), ("--env no-such-env", "onprem-ib")),
], ids=["against-without-diff", "diff-without-env", "against-two-envs", "unknown-env"])
def test_flags_that_do_not_go_together(envs: Path, monkeypatch, capsys, args: tuple[str, ...],
                                       names: tuple[str, ...]) -> None:
    _copy(envs, "x.lock")
    monkeypatch.chdir(envs.parent)
    res = _diff(envs, monkeypatch, capsys, *args)
    assert_clean_failure(res, 2, *names)


def test_a_relock_without_spack_is_an_environment_fault(envs: Path, monkeypatch,
                                                        capsys) -> None:
    """No --against: the re-lock needs Spack; without it exit 3, the lock as it was."""
    if builds.find_spack() is not None:
        pytest.skip("Spack is installed here: this case is about a machine without it")
    before = (envs / ENV / "spack.lock").read_bytes()
    res = _diff(envs, monkeypatch, capsys, "--env", str(envs / ENV), "--diff")
    assert_clean_failure(res, 3, "spack not found", "SPACK_ROOT")
    assert (envs / ENV / "spack.lock").read_bytes() == before


def _spack_writing(tmp_path: Path, lock: Path, exit_code: int = 0) -> Path:
    """A SPACK_ROOT whose ``bin/spack`` stands in for Spack's concretizer on a machine
    without Spack: ``spack -e DIR concretize -f`` writes *lock* as DIR/spack.lock, as
    Spack writes the lock it made. The real re-lock runs in tests/integration/test_spack.py
    where Spack is installed; this checks what the command does with what was written."""
    root = tmp_path / "spack-standin"
    (root / "bin").mkdir(parents=True)
    script = root / "bin" / "spack"
    script.write_text(f'#!/bin/sh\n[ "$1" = -e ] && [ "$3" = concretize ] || exit 9\n'
                      f'cp "{lock}" "$2/spack.lock"\n'
                      f'[ {exit_code} = 0 ] || echo "==> Error: concretization failed" >&2\n'
                      f'exit {exit_code}\n')
    script.chmod(0o755)
    return root


@pytest.mark.parametrize(("edit", "code", "kept"), [
    (_header_only, 0, True), (_hwloc_version, 1, False)], ids=["header-only", "a-version"])
def test_a_relock_keeps_the_lock_when_only_the_header_differs(
        envs: Path, tmp_path: Path, monkeypatch, capsys, edit: object, code: int,
        kept: bool) -> None:
    """Only the header differs: the committed bytes stay (git status clean). A spec
    changed: the new lock stays, the change named, and how to put the old one back."""
    lock = envs / ENV / "spack.lock"
    before = lock.read_bytes()
    written = _copy(envs, "written.lock", edit)
    monkeypatch.setenv("SPACK_ROOT", str(_spack_writing(tmp_path, written)))
    res = _diff(envs, monkeypatch, capsys, "--env", ENV, "--diff")
    assert res.returncode == code, res.output
    assert (lock.read_bytes() == before) is kept
    if kept:
        assert "kept as it was: the new lock differs only in its header" in res.stdout
    else:
        assert lock.read_bytes() == written.read_bytes()
        assert "changed: hwloc@2.13.0/" in res.stdout and "git checkout --" in res.stdout


def test_a_relock_that_fails_puts_the_lock_back(envs: Path, tmp_path: Path, monkeypatch,
                                               capsys) -> None:
    """Spack failing after it wrote half a lock: exit 2 with Spack's last lines, and the
    lock there was before, byte for byte."""
    lock = envs / ENV / "spack.lock"
    before = lock.read_bytes()
    half = _copy(envs, "half.lock", text=before[:5000].decode())
    monkeypatch.setenv("SPACK_ROOT", str(_spack_writing(tmp_path, half, exit_code=1)))
    res = _diff(envs, monkeypatch, capsys, "--env", ENV, "--diff")
    assert_clean_failure(res, 2, "spack concretize failed", "concretization failed")
    assert lock.read_bytes() == before
