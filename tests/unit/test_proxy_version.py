"""The proxy's version is a fact of the proxy: proxies/cfdio/VERSION names the files its
build uses (SHA256SUMS), so the committed locks pin a version, not a commit of the
checkout. No Spack needed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hpcval import cli, spack
from hpcval.core.paths import project_root

ROOT = project_root()
UPDATE = "`hpcval spack proxy-version --update`"


def _copy(tmp_path: Path) -> Path:
    """A checkout in tmp_path holding hpcval's versioned proxies (and what marks a
    checkout)."""
    for name in ("site-configs", "reframe-checks"):
        (tmp_path / name).mkdir()
    for name in spack.VERSIONED_PROXIES:
        shutil.copytree(ROOT / "proxies" / name, tmp_path / "proxies" / name,
                        ignore=shutil.ignore_patterns(name, "build-*"))
    return tmp_path


def test_the_checkouts_proxy_sources_are_those_its_version_names() -> None:
    """Fails when proxies/cfdio is edited without bumping VERSION: bump it and run
    `hpcval spack proxy-version --update`, then `hpcval spack lock` for the committed
    locks."""
    for name in spack.VERSIONED_PROXIES:
        assert spack.proxy_version_problem(name, ROOT) is None


def test_every_committed_lock_holds_the_proxy_at_its_version() -> None:
    for name in spack.environment_names(ROOT):
        env_dir = ROOT / "environments" / name
        if (env_dir / "spack.lock").is_file():
            assert spack.lock_proxy_versions(spack.read_lock(env_dir), ROOT) == [], name


@pytest.mark.parametrize(("name", "source"), [("cfdio", "cfdio.c"), ("gpubench", "gpubench.cu")])
def test_the_sums_are_sha256sum_files_of_the_build_files_only(name: str, source: str) -> None:
    directory = ROOT / "proxies" / name
    version, sums = spack.read_proxy_sums(directory)
    assert version == (directory / "VERSION").read_text().strip()
    assert sorted(sums) == spack.proxy_build_files(directory)
    assert {"Makefile", source} <= set(sums) and "README.md" not in sums
    if shutil.which("sha256sum"):
        subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=directory, check=True)


def test_an_edit_without_a_new_version_is_named_in_one_line(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    source = root / "proxies" / "cfdio" / "cfdio.c"
    source.write_text(source.read_text() + "\n/* changed */\n")
    (root / "proxies" / "cfdio" / "cfdio.h").write_text("/* new */\n")
    version = (root / "proxies" / "cfdio" / "VERSION").read_text().strip()
    assert spack.proxy_version_problem("cfdio", root) == (
        f"proxies/cfdio changed since VERSION {version} (cfdio.c, cfdio.h): bump "
        f"proxies/cfdio/VERSION and run {UPDATE}")
    # the documentation and the scripts are not the build's
    (root / "proxies" / "cfdio" / "cfdio.h").unlink()
    source.write_text(source.read_text().replace("\n/* changed */\n", ""))
    (root / "proxies" / "cfdio" / "README.md").write_text("edited\n")
    assert spack.proxy_version_problem("cfdio", root) is None


def test_update_needs_a_new_version_then_writes_the_sums(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    directory = root / "proxies" / "cfdio"
    before = (directory / "SHA256SUMS").read_text()
    assert spack.update_proxy_sums("cfdio", root) == ("1.0.0", False)
    (directory / "Makefile").write_text((directory / "Makefile").read_text() + "# x\n")
    with pytest.raises(spack.InputError, match="bump proxies/cfdio/VERSION first"):
        spack.update_proxy_sums("cfdio", root)
    assert (directory / "SHA256SUMS").read_text() == before
    (directory / "VERSION").write_text("1.0.1\n")
    assert spack.proxy_version_problem("cfdio", root) == (
        f"proxies/cfdio/SHA256SUMS was written for 1.0.0, VERSION is 1.0.1: run {UPDATE}")
    assert spack.update_proxy_sums("cfdio", root) == ("1.0.1", True)
    assert spack.proxy_version_problem("cfdio", root) is None
    assert spack.read_proxy_sums(directory)[0] == "1.0.1"
    # what --update writes for an unchanged proxy is the committed file
    (directory / "Makefile").write_bytes((ROOT / "proxies/cfdio/Makefile").read_bytes())
    (directory / "VERSION").write_text("1.0.0\n")
    assert spack.update_proxy_sums("cfdio", root) == ("1.0.0", True)
    assert (directory / "SHA256SUMS").read_text() == before


def test_missing_or_wrong_version_files_are_named(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    directory = root / "proxies" / "cfdio"
    (directory / "VERSION").write_text("main\n")
    assert spack.proxy_version_problem("cfdio", root) == (
        "proxies/cfdio/VERSION: 'main' is not a version like 1.0.0")
    (directory / "VERSION").unlink()
    assert spack.proxy_version_problem("cfdio", root).startswith(  # type: ignore[union-attr]
        "proxies/cfdio/VERSION: missing")


def test_cli_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                        capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(tmp_path)
    monkeypatch.setenv("HPCVAL_ROOT", str(root))
    assert cli.main(["spack", "proxy-version"]) == 0
    source = root / "proxies" / "cfdio" / "cfdio.c"
    source.write_text(source.read_text() + "\n")
    capsys.readouterr()
    assert cli.main(["spack", "proxy-version"]) == 2
    err = capsys.readouterr().err
    assert err == (f"hpcval: error: proxies/cfdio changed since VERSION 1.0.0 (cfdio.c): bump "
                   f"proxies/cfdio/VERSION and run {UPDATE}\n")
    assert cli.main(["spack", "proxy-version", "--update"]) == 2
    (root / "proxies" / "cfdio" / "VERSION").write_text("1.1.0\n")
    assert cli.main(["spack", "proxy-version", "--update"]) == 0
    assert cli.main(["spack", "proxy-version"]) == 0


def test_doctor_names_a_stale_proxy_and_a_lock_of_another_version() -> None:
    lock = {"concrete_specs": {"a": {"name": "hpcval-cfdio", "version": "main"},
                               "b": {"name": "ior", "version": "4.0.0"}}}
    version = (ROOT / "proxies" / "cfdio" / "VERSION").read_text().strip()
    assert spack.lock_proxy_versions(lock, ROOT) == [
        f"hpcval-cfdio@main, proxies/cfdio/VERSION is {version}"]
