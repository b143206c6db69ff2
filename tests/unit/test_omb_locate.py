"""How OMB checks find their programs: $HPCVAL_OMB_DIR, then PATH."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpcval.rfm.omb import OMB_DIR_VAR
from hpcval.rfm.programs import locate_program


def find_omb_program(name: str, environ: str,
                     spack_prefix: str | None = None) -> tuple[str | None, str]:
    """An OMB program as the OMB checks look for it (``find_program(program, OMB_DIR_VAR)``
    after the environment's Spack build)."""
    return locate_program(name, spack_prefix=spack_prefix, dirs_var=OMB_DIR_VAR,
                          environ=environ)


def _program(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_found_in_subdirectory_of_omb_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prog = _program(tmp_path / "libexec" / "osu-micro-benchmarks" / "mpi" / "pt2pt" / "osu_bw")
    monkeypatch.setenv("HPCVAL_OMB_DIR", str(tmp_path))
    monkeypatch.delenv("HPCVAL_OMB_ENVIRON", raising=False)
    path, where = find_omb_program("osu_bw", "impi")
    assert path == str(prog)
    assert where == "$HPCVAL_OMB_DIR"


def test_omb_dir_only_for_its_environment(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _program(tmp_path / "osu_bw")
    monkeypatch.setenv("HPCVAL_OMB_DIR", str(tmp_path))
    monkeypatch.setenv("HPCVAL_OMB_ENVIRON", "impi")
    monkeypatch.setenv("PATH", "/nonexistent")
    path, where = find_omb_program("osu_bw", "openmpi")
    assert path is None
    assert "PATH" in where


def test_path_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prog = _program(tmp_path / "bin" / "osu_latency")
    monkeypatch.delenv("HPCVAL_OMB_DIR", raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}/nonexistent")
    assert find_omb_program("osu_latency", "openmpi")[0] == str(prog)


def test_spack_build_of_the_environment_comes_first(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    spack = _program(tmp_path / "spack" / "libexec" / "osu-micro-benchmarks" / "mpi" / "pt2pt"
                     / "osu_bw")
    _program(tmp_path / "omb" / "osu_bw")
    monkeypatch.setenv("HPCVAL_OMB_DIR", str(tmp_path / "omb"))
    monkeypatch.delenv("HPCVAL_OMB_ENVIRON", raising=False)
    path, where = find_omb_program("osu_bw", "impi", spack_prefix=str(tmp_path / "spack"))
    assert path == str(spack)
    assert where == f"the environment's Spack build ({tmp_path / 'spack'})"
