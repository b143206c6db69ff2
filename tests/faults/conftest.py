"""The fault corpus: bad inputs and faults a careless operator or a sick
machine produces, each run through the real ``hpcval`` command (and, for
benchmarks, real ReFrame with real MPI launchers on the ``local`` site).

Every case asserts the documented exit code (docs/errors.md), that the
message names the file and key, that no Python traceback reaches the user,
and that the results already stored are unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAULTS = Path(__file__).resolve().parent
CHECKS = FAULTS / "checks"
FAKE_IMB = FAULTS / "bin" / "fake-imb"
BIN = Path(sys.executable).parent

TRACEBACK = "Traceback (most recent call last)"


def make_checkout(parent: Path, max_jobs: int = 4) -> Path:
    """A checkout of the `local` site under *parent* (config copied, checks
    linked); fake benchmarks are light, so the copy runs up to *max_jobs*
    test cases at once (the shipped site runs one: real benchmarks must not
    share the machine)."""
    root = parent / "hpcval"
    (root / "site-configs").mkdir(parents=True)
    shutil.copytree(ROOT / "site-configs" / "local", root / "site-configs" / "local")
    for name in ("reframe-checks", "proxies"):
        (root / name).symlink_to(ROOT / name)
    config = root / "site-configs" / "local" / "config.py"
    config.write_text(config.read_text().replace('"max_jobs": 1,', f'"max_jobs": {max_jobs},'))
    return root


@dataclass
class Result:
    """What one ``hpcval`` command did."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def error_line(self) -> str:
        lines = [ln for ln in self.stderr.splitlines() if ln.startswith("hpcval: error:")]
        return lines[-1] if lines else ""


def run(root: Path, *args: str, env: dict[str, str] | None = None,
        timeout: float = 600) -> Result:
    """``hpcval ARGS`` on the checkout *root*."""
    environ = {**os.environ, "HPCVAL_ROOT": str(root), **(env or {})}
    if not env or "HPCVAL_VAR" not in env:
        environ.pop("HPCVAL_VAR", None)
    proc = subprocess.run([str(BIN / "hpcval"), *args], cwd=root, env=environ, text=True,
                          capture_output=True, timeout=timeout, errors="replace")
    return Result(proc.returncode, proc.stdout, proc.stderr)


def run_inprocess(root: Path, *args: str, monkeypatch: pytest.MonkeyPatch,
                  capsys: pytest.CaptureFixture[str]) -> Result:
    """``hpcval ARGS`` through :func:`hpcval.cli.main` in this process (the
    same code path as the command, without a Python start-up per case); an
    exception escaping ``main`` is what a user would see as a traceback."""
    import traceback

    from hpcval import cli

    monkeypatch.setenv("HPCVAL_ROOT", str(root))
    monkeypatch.delenv("HPCVAL_VAR", raising=False)
    monkeypatch.chdir(root)
    capsys.readouterr()
    try:
        code = cli.main(list(args))
    except SystemExit as exit_:  # argparse
        code = int(exit_.code or 0)
    except BaseException:  # noqa: BLE001 - shown as the traceback a user would get
        out = capsys.readouterr()
        return Result(-1, out.out, out.err + traceback.format_exc())
    out = capsys.readouterr()
    return Result(code, out.out, out.err)


def tree_digest(path: Path) -> dict[str, str]:
    """Every file below *path* with a digest of its content: the results
    store, as a value to compare before and after a fault."""
    digest: dict[str, str] = {}
    if not path.exists():
        return digest
    for f in sorted(path.rglob("*")):
        if f.is_file() and not f.name.endswith((".lock", ".log")) and "logs" not in f.parts:
            digest[str(f.relative_to(path))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return digest


def assert_clean_failure(res: Result, code: int, *names: str) -> None:
    """Exit *code*, one ``hpcval: error:`` line naming every one of *names*,
    no traceback."""
    assert res.returncode == code, res.output
    assert TRACEBACK not in res.output, res.output
    line = res.error_line() or res.stderr.strip().splitlines()[-1]
    for name in names:
        assert name in line, f"{name!r} not in {line!r}"


def report_cases(report: Path) -> dict[str, dict]:
    """Test cases of a ReFrame run report by display name and environment."""
    data = json.loads(report.read_text())
    return {f"{tc['display_name']}+{tc['environ']}": tc for tc in data["runs"][-1]["testcases"]}


def needs_impi() -> None:
    from hpcval.rfm.site import intel_mpi_from_pypi

    if intel_mpi_from_pypi() is None:
        pytest.skip("Intel MPI from PyPI is not installed in this Python environment: "
                    "run `make setup`")


#: A passing run of the fake IMB (its control mode), selected by name.
OK_RUN = ("validate", "--site", "local", "--", "-c", str(CHECKS),
          "-n", "fake_imb_check.*mode=ok$")


@pytest.fixture(scope="session")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout with one passing run in its results store, shared by the
    corpus (cases restore what they change and assert the store unchanged)."""
    needs_impi()
    root = make_checkout(tmp_path_factory.mktemp("stored"))
    res = run(root, *OK_RUN)
    assert res.returncode == 0, res.output
    return root


@pytest.fixture(scope="module")
def module_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_checkout(tmp_path_factory.mktemp("faults"))


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return make_checkout(tmp_path)


@pytest.fixture
def mount_tmpfs(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """``mount_tmpfs(size, readonly=False)``: a small tmpfs (a full or a
    read-only disk), unmounted afterwards; skips without root."""
    mounted: list[Path] = []

    def mount(size: str, readonly: bool = False) -> Path:
        if os.geteuid() != 0 or not shutil.which("mount"):
            pytest.skip("mounting a small tmpfs (full or read-only disk) needs root")
        where = tmp_path / f"fs{len(mounted)}"
        where.mkdir()
        # 0755 as a disk mounted for a root service is: a 1777 tmpfs is refused
        # as the results store's own directory when run as root (core/trust.py)
        opts = f"size={size},mode=0755" + (",ro" if readonly else "")
        m = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)],
                           capture_output=True, text=True)
        if m.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {m.stderr.strip()}")
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], check=False)
