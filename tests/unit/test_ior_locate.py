"""How the IOR check finds IOR: $HPCVAL_IOR_DIR, the environment's PATH, PATH."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hpcval.rfm.ior import IOR_DIR_VAR
from hpcval.rfm.programs import environ_path_dirs, locate_program


def find_ior(environ: str | None, environ_dirs: list[str] | None = None) -> tuple[str | None, str]:
    """IOR as the IOR check looks for it (``find_program("ior", IOR_DIR_VAR)``)."""
    return locate_program("ior", dirs_var=IOR_DIR_VAR, environ=environ,
                          environ_dirs=environ_dirs)


def fake_ior(directory: Path) -> Path:
    directory.mkdir(parents=True)
    path = directory / "ior"
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HPCVAL_IOR_DIR", raising=False)
    monkeypatch.delenv("HPCVAL_IOR_ENVIRON", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))


def test_prefix_from_hpcval_ior_dir(clean_env: None, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ior = fake_ior(tmp_path / "prefix" / "bin")
    monkeypatch.setenv("HPCVAL_IOR_DIR", f"{tmp_path / 'nothing'}:{tmp_path / 'prefix'}")
    assert find_ior("impi") == (str(ior), "$HPCVAL_IOR_DIR")
    assert find_ior(None)[0] == str(ior)
    # a build for another MPI is not used by another environment
    path, where = find_ior("openmpi")
    assert path is None and "or PATH" in where
    monkeypatch.setenv("HPCVAL_IOR_ENVIRON", "openmpi")
    assert find_ior("openmpi")[0] == str(ior)


def test_environment_path_then_path(clean_env: None, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    view = fake_ior(tmp_path / "view" / "bin")
    dirs = environ_path_dirs([["PATH", f"{view.parent}:$PATH"], ["FI_PROVIDER_PATH", "/x"]])
    assert dirs == [str(view.parent)]
    assert environ_path_dirs({"PATH": f"{view.parent}:$PATH"}) == [str(view.parent)]
    assert find_ior("spack-openmpi", dirs) == (str(view), "the environment's PATH")
    on_path = fake_ior(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{on_path.parent}{os.pathsep}{tmp_path / 'empty'}")
    assert find_ior("impi")[0] == str(on_path)


def test_absent(clean_env: None) -> None:
    path, where = find_ior("impi")
    assert path is None
    assert where == "$HPCVAL_IOR_DIR (unset) or PATH"
