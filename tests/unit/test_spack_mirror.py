"""The source mirror (``hpcval spack mirror``) and the doctor's checksum check, on real
git repositories and real gzip archives made here; no Spack needed."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from hpcval import spack
from hpcval.spack import mirror
from hpcval.spack.preinstall import Diagnosis, corrupt_sources, installable_roots, slurm_version

PACKAGE_PY = '''
from spack_repo.builtin.build_systems.makefile import MakefilePackage
from spack.package import *


class Tiny(MakefilePackage):
    """A package as Spack's builtin repository writes them."""

    url = "https://github.com/example/tiny/archive/1.0.tar.gz"
    git = "https://github.com/example/tiny.git"

    version("develop", branch="main")
    with default_args(deprecated=False):
        version("{version}", sha256="{sha256}")
    version("0.9", sha256="{other}")

    patch("https://github.com/example/tiny/commit/abc.patch?full_index=1",
          sha256="{patch}", when="%gcc@9:")
'''


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _repository(tmp_path: Path) -> Path:
    """A real repository with a tag 1.0, like a clone under --sources."""
    repo = tmp_path / "sources" / "tiny"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "Makefile").write_text("all:\n\ttrue\n")
    (repo / "tiny.c").write_text("int main(void) { return 0; }\n")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tiny 1.0")
    _git(repo, "tag", "1.0")
    return repo


def _published_sha256(repo: Path, tag: str, prefix: str) -> str:
    """The sha256 of the archive as the shell pipeline of docs/spack.md makes it."""
    out = subprocess.run(f"git -C {repo} archive --format=tar --prefix={prefix} {tag} "
                         "| gzip -n", shell=True, check=True, capture_output=True).stdout
    return hashlib.sha256(out).hexdigest()


def _package(tmp_path: Path, sha256: str) -> Path:
    path = tmp_path / "builtin" / "packages" / "tiny" / "package.py"
    path.parent.mkdir(parents=True)
    path.write_text(PACKAGE_PY.format(version="1.0", sha256=sha256, other="0" * 64,
                                      patch="9" * 64))
    return path


RECIPES = {"tiny": mirror.Recipe("example/tiny", "{version}", "tiny-{version}/")}


def test_package_facts_read_versions_urls_and_patches_without_running_the_package(
        tmp_path: Path) -> None:
    facts = mirror.package_facts(_package(tmp_path, "a" * 64))
    assert facts.versions["1.0"] == {"sha256": "a" * 64}  # inside `with default_args`
    assert facts.versions["develop"] == {"branch": "main"}
    assert facts.patches == {"9" * 64: "https://github.com/example/tiny/commit/abc.patch"
                             "?full_index=1"}
    assert mirror.version_url(facts, "1.0") == "https://github.com/example/tiny/archive/" \
        "1.0.tar.gz"
    assert mirror.version_url(facts, "0.9") == "https://github.com/example/tiny/archive/" \
        "0.9.tar.gz"


def test_an_archive_enters_the_mirror_only_with_the_sha256_of_its_package(
        tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    good = _published_sha256(repo, "1.0", "tiny-1.0/")
    src = mirror.Source("tiny", "1.0", good, "https://github.com/example/tiny/archive/"
                        "1.0.tar.gz", _package(tmp_path, good))
    into = tmp_path / "mirror"
    made = mirror.make_mirror([src], into, tmp_path / "sources", RECIPES)
    target = into / f"_source-cache/archive/{good[:2]}/{good}.tar.gz"
    assert made.made == [f"tiny@1.0: {target} (sha256 verified against package.py)"]
    assert mirror.sha256_of(target) == good
    # a shared mirror: Spack run by another user reads it (not the temp file's 0600)
    assert target.stat().st_mode & 0o044 == 0o044
    # made again: found, verified, left as it is
    again = mirror.make_mirror([src], into, tmp_path / "sources", RECIPES)
    assert again.present == [f"tiny@1.0: {target} (sha256 verified)"] and not again.made

    # a package declaring another sum: named with both, nothing put in the mirror
    wrong = mirror.Source("tiny", "1.0", "b" * 64, src.url, src.package_py)
    result = mirror.make_mirror([wrong], tmp_path / "other", tmp_path / "sources", RECIPES)
    assert result.made == [] and len(result.wrong) == 1
    assert f"has sha256 {good}" in result.wrong[0] and "declares " + "b" * 64 in result.wrong[0]
    assert not any(p.is_file() for p in (tmp_path / "other").rglob("*"))


def test_sources_without_a_recipe_or_clone_are_listed_with_their_url(tmp_path: Path) -> None:
    osu = mirror.Source("osu-micro-benchmarks", "7.5.2", "6" * 64,
                        "https://mvapich.cse.ohio-state.edu/download/mvapich/"
                        "osu-micro-benchmarks-7.5.2.tar.gz", tmp_path / "package.py")
    tiny = mirror.Source("tiny", "1.0", "a" * 64, "u", tmp_path / "package.py")
    result = mirror.make_mirror([osu, tiny], tmp_path / "m", tmp_path / "no-sources", RECIPES)
    assert result.need_network == [
        "osu-micro-benchmarks@7.5.2: released only as a tarball from mvapich.cse.ohio-state.edu "
        "(no public repository); fetch https://mvapich.cse.ohio-state.edu/download/mvapich/"
        f"osu-micro-benchmarks-7.5.2.tar.gz (sha256 {'6' * 64}) on a machine with network "
        f"into <mirror>/_source-cache/archive/66/{'6' * 64}.tar.gz (or `spack mirror create`)"]
    assert result.missing_clones == [
        f"tiny@1.0: no clone at {tmp_path / 'no-sources' / 'tiny'}: `git clone "
        f"https://github.com/example/tiny.git {tmp_path / 'no-sources' / 'tiny'}` (on a machine "
        "with network; copy it here)"]


def test_environment_sources_come_from_the_lock_and_the_package_files(tmp_path: Path) -> None:
    """What an install fetches: the lock's nodes that are not external and have code,
    with the sha256 of their package.py and the patches the lock applies."""
    _package(tmp_path, "a" * 64)
    env_dir = tmp_path / "environments" / "e"
    env_dir.mkdir(parents=True)
    (env_dir / "spack.lock").write_text(
        '{"roots": [], "concrete_specs": {'
        '"x": {"name": "tiny", "version": "1.0", "namespace": "builtin",'
        ' "patches": ["' + "9" * 64 + '"]},'
        '"y": {"name": "tiny", "version": "1.0", "namespace": "builtin"},'
        '"z": {"name": "gcc", "version": "12.2.0", "external": {"path": "/usr"}}}}')
    found = mirror.environment_sources(env_dir, tmp_path / "builtin", tmp_path)
    assert [(s.label, s.sha256, s.mirror_path()) for s in found] == [
        ("tiny@1.0", "a" * 64, f"_source-cache/archive/aa/{'a' * 64}.tar.gz"),
        ("tiny@1.0 (patch)", "9" * 64, f"_source-cache/archive/99/{'9' * 64}")]
    with pytest.raises(spack.InputError, match="no packages/ directory"):
        mirror.environment_sources(env_dir, tmp_path / "nowhere", tmp_path)


def test_the_doctor_names_a_truncated_archive_with_both_sums(tmp_path: Path) -> None:
    """A real gzip archive, then the same cut short (what an interrupted copy or a
    pipeline over a missing clone leaves under the checksum's name)."""
    repo = _repository(tmp_path)
    whole = tmp_path / "whole.tar.gz"
    mirror.git_archive(repo, "1.0", "tiny-1.0/", whole)
    expected = mirror.sha256_of(whole)
    where = tmp_path / "m" / f"_source-cache/archive/{expected[:2]}/{expected}.tar.gz"
    where.parent.mkdir(parents=True)
    shutil.copy(whole, where)
    report = {"local": [str(tmp_path / "m")], "cache": "/c", "roots": [
        {"spec": "tiny", "hash": "h", "installed": False, "sources": [0]}], "sources": [
        {"spec": "tiny@1.0", "kind": "URLFetchStrategy", "sha256": expected, "url": "u",
         "paths": [str(where)], "found": [str(where)]}]}
    assert corrupt_sources(report) == []
    assert installable_roots(report)[0][0]["spec"] == "tiny"

    data = whole.read_bytes()
    where.write_bytes(data[: len(data) // 2])
    actual = hashlib.sha256(data[: len(data) // 2]).hexdigest()
    assert corrupt_sources(report) == [
        f"source of tiny@1.0: {where}: sha256 {actual}, expected {expected} "
        f"({len(data) // 2} bytes: truncated or not the published archive): remake it with "
        "`hpcval spack mirror`"]
    ready, blocked = installable_roots(report)
    assert ready == [] and blocked == {"tiny": ["tiny@1.0"]}


def test_doctor_verdicts_and_their_exit_codes() -> None:
    assert Diagnosis(ready=["a"]).verdict == "ready"
    assert Diagnosis(ready=["a"], blocked={"b": ["osu@7.5.2"]}, missing=["m"]).verdict == "subset"
    assert Diagnosis(ready=[], blocked={"b": ["osu@7.5.2"]}).verdict == "broken"
    assert Diagnosis(problems=["p"], ready=["a"]).verdict == "broken"
    assert spack.DOCTOR_EXIT == {"ready": 0, "subset": 1, "broken": 3}


@pytest.mark.skipif(shutil.which("srun") is None, reason="no srun on this machine")
def test_slurm_version_is_read_without_a_configured_controller(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a fresh `make system-deps` host srun stops before printing its version (no
    usable slurm.conf, here an empty one); the version is still read, in one line, and
    it is Debian's package's."""
    (tmp_path / "slurm.conf").write_text("")
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    srun = Path(str(shutil.which("srun")))
    plain = subprocess.run([srun, "--version"], capture_output=True, text=True, check=False)
    assert plain.returncode != 0  # srun itself cannot say
    said = slurm_version(srun)
    assert "\n" not in said and "error" not in said, said
    version = said.split()[-1]
    assert version[0].isdigit(), said
    dpkg = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "slurm-client"],
                          capture_output=True, text=True, check=False).stdout
    if dpkg:
        assert dpkg.startswith(version)


def test_mirror_cli_wrong_input_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    from hpcval import cli

    assert cli.main(["spack", "mirror", "--env", "no-such-system"]) == 2
    assert "no such Spack environment" in capsys.readouterr().err
    monkeypatch.delenv("SPACK_ROOT", raising=False)
    assert cli.main(["spack", "mirror", "--env", "onprem-ib"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--mirror: none given" in err[0]
