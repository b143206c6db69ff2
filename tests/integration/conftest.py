"""Shared pieces of the integration tests: a temporary checkout of the `local`
site (its config copied so references can be edited, checks linked, results
store inside the temporary directory) and a runner for the `hpcval` CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

HpcvalRunner = Callable[..., subprocess.CompletedProcess[str]]


def make_checkout(parent: Path, site: str = "local") -> Path:
    """A checkout under *parent* with *site*'s config copied, the checks and proxies linked."""
    root = parent / "hpcval"
    (root / "site-configs").mkdir(parents=True)
    shutil.copytree(ROOT / "site-configs" / site, root / "site-configs" / site)
    for name in ("reframe-checks", "proxies"):
        (root / name).symlink_to(ROOT / name)
    return root


def run_hpcval(root: Path, *args: str, env: Mapping[str, str] | None = None,
               timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run ``hpcval ARGS`` on the checkout *root* (``HPCVAL_ROOT``), output captured."""
    environ = dict(os.environ if env is None else env, HPCVAL_ROOT=str(root))
    environ.pop("HPCVAL_VAR", None)
    return subprocess.run([str(BIN / "hpcval"), *args], cwd=root, env=environ, text=True,
                          capture_output=True, timeout=timeout)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return make_checkout(tmp_path)


@pytest.fixture
def hpcval() -> HpcvalRunner:
    return run_hpcval


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """``tiny_fs(size)`` mounts a tmpfs of *size* (e.g. ``"64k"``) to force a full
    disk and returns its directory; unmounted afterwards. Skips without root or
    where a tmpfs cannot be mounted."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        if os.geteuid() != 0 or not shutil.which("mount"):
            pytest.skip("mounting a tiny tmpfs to force a full disk needs root")
        tiny = tmp_path / f"tiny{len(mounted)}"
        tiny.mkdir()
        m = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(tiny)],
                           capture_output=True, text=True)
        if m.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {m.stderr.strip()}")
        mounted.append(tiny)
        return tiny

    yield mount
    for tiny in mounted:
        subprocess.run(["umount", str(tiny)], check=False)
