"""``hpcval spack externals``: the venv's Intel MPI wheels as Spack's intel-oneapi-mpi
external, laid out as a oneAPI prefix, written only beside environments that include it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hpcval import spack
from hpcval.core.errors import HpcvalError
from hpcval.spack import venvmpi


def _fake_wheel_venv(root: Path, version: str = "2021.18.1") -> Path:
    """A venv laid out as the impi-rt/impi-devel wheels install it (flat bin/,
    lib/, include/), with the impi-rt distribution metadata."""
    venv = root / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "mpirun").write_text("#!/bin/sh\n")
    (venv / "include").mkdir()
    (venv / "include" / "mpi.h").write_text("")
    lib = venv / "lib"
    lib.mkdir()
    for name in ("libmpi.so.12", "libfabric.so.1", "libtcp-fi.so"):
        (lib / name).write_text("")
    dist = lib / "python3.11" / "site-packages" / f"impi_rt-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: impi-rt\nVersion: {version}\n")
    return venv


def _environments(root: Path) -> Path:
    envs = root / "environments"
    for name, include in (("local", True), ("gcp", False)):
        (envs / name).mkdir(parents=True)
        text = "spack:\n  include:\n  - ../common/pins.yaml\n"
        if include:
            text += f"  - {spack.VENV_MPI_INCLUDE}\n"
        (envs / name / "spack.yaml").write_text(text)
    return envs


def test_externals_written_only_where_included(tmp_path: Path) -> None:
    venv = _fake_wheel_venv(tmp_path)
    envs = _environments(tmp_path)
    written = spack.write_venv_externals(venv, root=tmp_path)
    assert written == [envs / "local" / spack.VENV_MPI_INCLUDE]
    assert not (envs / "gcp" / spack.VENV_MPI_INCLUDE).exists()
    config = yaml.safe_load(written[0].read_text())
    (external,) = config["packages"]["intel-oneapi-mpi"]["externals"]
    assert external["spec"] == "intel-oneapi-mpi@2021.18.1 ~envmods"
    assert config["packages"]["intel-oneapi-mpi"]["buildable"] is False
    prefix = Path(external["prefix"])
    assert prefix == venv.resolve() / spack.ONEAPI_TREE


def test_oneapi_layout_leads_to_the_wheel_files(tmp_path: Path) -> None:
    venv = _fake_wheel_venv(tmp_path)
    root = spack.oneapi_tree(venv, "2021.18.1")
    component = root / "mpi" / "2021.18"
    assert (component / "bin" / "mpirun").resolve() == (venv / "bin" / "mpirun").resolve()
    assert (component / "include" / "mpi.h").is_file()
    # Spack's intel-oneapi-mpi looks for libmpi in lib/release, libfabric providers in lib
    assert (component / "lib" / "release" / "libmpi.so.12").is_file()
    assert (component / "lib" / "libtcp-fi.so").is_file()
    assert not (component / "lib" / "python3.11").exists()
    assert spack.oneapi_tree(venv, "2021.18.1") == root  # idempotent


def test_rewrites_only_when_changed(tmp_path: Path) -> None:
    venv = _fake_wheel_venv(tmp_path)
    _environments(tmp_path)
    (target,) = spack.write_venv_externals(venv, root=tmp_path)
    target.write_text("stale\n")
    spack.write_venv_externals(venv, root=tmp_path)
    assert "intel-oneapi-mpi@2021.18.1" in target.read_text()


def test_venv_without_intel_mpi_is_a_clear_error(tmp_path: Path) -> None:
    _environments(tmp_path)
    with pytest.raises(HpcvalError, match="no bin/mpirun"):
        spack.write_venv_externals(tmp_path / "nothing", root=tmp_path)
    venv = _fake_wheel_venv(tmp_path)
    for meta in venv.glob("lib/python3.11/site-packages/*.dist-info"):
        (meta / "METADATA").unlink()
        meta.rmdir()
    with pytest.raises(HpcvalError, match="no impi-rt wheel"):
        spack.write_venv_externals(venv, root=tmp_path)


def test_cli_writes_for_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcval import cli

    venv = _fake_wheel_venv(tmp_path)
    envs = _environments(tmp_path)
    monkeypatch.setattr(venvmpi, "project_root", lambda: tmp_path)
    assert cli.main(["spack", "externals", "--prefix", str(venv)]) == 0
    assert (envs / "local" / spack.VENV_MPI_INCLUDE).is_file()
    assert cli.main(["spack", "externals", "--prefix", str(tmp_path / "none")]) == 2


def test_new_site_gets_the_intel_mpi_external_its_spack_yaml_includes(tmp_path: Path) -> None:
    """`make setup` wrote the include for the environments of that moment; a site
    made later copies `local`'s spack.yaml, which includes it, so `site new`
    writes it too (else Spack stops at a missing include)."""
    from hpcval.site.scaffold import new_site

    venv = _fake_wheel_venv(tmp_path)
    envs = _environments(tmp_path)
    (tmp_path / "site-configs").mkdir()
    written = new_site("newsite", tmp_path, scheduler="local", venv=venv)
    include = envs / "newsite" / spack.VENV_MPI_INCLUDE
    assert include in written and include.is_file()
    assert yaml.safe_load(include.read_text())["packages"]["intel-oneapi-mpi"]["buildable"] \
        is False
    # only the new site's file is reported as written by `site new`
    assert [p for p in written if p.name == spack.VENV_MPI_INCLUDE] == [include]
