"""Shared pieces of the integration tests: a temporary checkout of the `local`
site (its config copied so references can be edited, checks linked, results
store inside the temporary directory) and a runner for the `hpcval` CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
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
