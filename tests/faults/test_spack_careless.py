"""``hpcval spack lock/doctor/mirror/install`` as a careless user runs them on
a machine without Spack: a file where a directory goes, a lock or manifest
that is not one, a damaged site configuration, a truncated archive in the
mirror. Each ends with the documented exit code (2 wrong input, 3 the
machine: Spack not found, a source that cannot be made here), one line
naming the file or flag, and no traceback (docs/errors.md, docs/spack.md)."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hpcval.spack import builds

from .conftest import ROOT, assert_clean_failure, make_checkout, run_inprocess

pytestmark = pytest.mark.integration

OSU_SHA = "2" * 64
OSU_PY = f'''
class OsuMicroBenchmarks(AutotoolsPackage):
    url = "https://mvapich.cse.ohio-state.edu/download/mvapich/osu-micro-benchmarks-7.5.2.tar.gz"
    version("7.5.2", sha256="{OSU_SHA}")
'''
MANIFEST = """spack:
  specs: [osu-micro-benchmarks]
  packages:
    all:
      require:
      - target=x86_64_v3
"""
LOCK = {"_meta": {"lockfile-version": 6},
        "roots": [{"hash": "bbb", "spec": "osu-micro-benchmarks"}],
        "concrete_specs": {"bbb": {"name": "osu-micro-benchmarks", "version": "7.5.2",
                                   "namespace": "builtin",
                                   "arch": {"target": "x86_64_v3"}}}}


@dataclass
class World:
    """A checkout with an environment ``tiny`` (OSU alone, locked), a builtin
    repository with OSU's package.py, an empty mirror and sources folder."""

    root: Path
    env: Path
    builtin: Path
    mirror: Path
    sources: Path
    afile: Path
    environ: dict[str, str] = field(default_factory=dict)

    def mirror_args(self, **given: Path) -> tuple[str, ...]:
        folders = {"mirror": self.mirror, "builtin": self.builtin, "sources": self.sources,
                   **given}
        return ("spack", "mirror", "--env", str(self.env),
                *[a for k, v in folders.items() for a in (f"--{k}", str(v))])


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    if builds.find_spack() is not None:
        pytest.skip("Spack is installed here: these cases are about a machine without it")
    root = make_checkout(tmp_path)
    shutil.copytree(ROOT / "environments", root / "environments")
    env = root / "environments" / "tiny"
    env.mkdir()
    (env / "spack.yaml").write_text(MANIFEST)
    (env / "spack.lock").write_text(json.dumps(LOCK))
    builtin = tmp_path / "builtin"
    (builtin / "packages" / "osu_micro_benchmarks").mkdir(parents=True)
    (builtin / "packages" / "osu_micro_benchmarks" / "package.py").write_text(OSU_PY)
    for name in ("mirror", "sources"):
        (tmp_path / name).mkdir()
    afile = tmp_path / "a-file"
    afile.write_text("not a directory\n")
    for var in ("SPACK_ROOT", "HPCVAL_SPACK_SOURCES"):
        monkeypatch.delenv(var, raising=False)
    return World(root, env, builtin, tmp_path / "mirror", tmp_path / "sources", afile)


def _run(world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
         *args: str) -> object:
    return run_inprocess(world.root, *args, monkeypatch=monkeypatch, capsys=capsys)


def test_lock_without_spack_says_spack_not_found(world: World, monkeypatch, capsys) -> None:
    res = _run(world, monkeypatch, capsys, "spack", "lock", "--env", "tiny")
    assert_clean_failure(res, 3, "spack not found", "SPACK_ROOT")


def test_doctor_on_an_environment_never_locked(world: World, monkeypatch, capsys) -> None:
    (world.env / "spack.lock").unlink()
    res = _run(world, monkeypatch, capsys, "spack", "doctor", "--env", "tiny")
    assert_clean_failure(res, 3, "problems in", "tiny")
    assert "spack.lock: missing: run `hpcval spack lock --env tiny`" in res.stdout
    assert "spack not found" in res.stdout


def test_install_of_an_environment_that_does_not_exist(world: World, monkeypatch,
                                                       capsys) -> None:
    res = _run(world, monkeypatch, capsys, "spack", "install", "--env", "nosuch")
    assert_clean_failure(res, 2, "--env nosuch", "no such Spack environment", "tiny")


@pytest.mark.parametrize("content, names", [
    (b"spack:\n  specs: [\xff]\n", ("spack.yaml", "not UTF-8")),
    (b"spack:\n  specs: [oops\n", ("spack.yaml", "line 3", "not valid YAML")),
], ids=["manifest-not-utf8", "manifest-yaml-syntax"])
def test_manifest_that_is_not_one(world: World, monkeypatch, capsys, content: bytes,
                                  names: tuple[str, ...]) -> None:
    (world.env / "spack.yaml").write_bytes(content)
    res = _run(world, monkeypatch, capsys, "spack", "doctor", "--env", "tiny")
    assert_clean_failure(res, 2, *names)
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


@pytest.mark.parametrize("content, command, names", [
    (b"[1, 2]", "doctor", ("spack.lock", "not an object", "hpcval spack lock --env tiny")),
    (json.dumps({**LOCK, "concrete_specs": [1]}).encode(), "mirror",
     ("spack.lock", "concrete_specs", "not a Spack lock")),
    (bytes(range(256)) * 8, "doctor", ("spack.lock", "not UTF-8")),
    (json.dumps(LOCK).encode()[:60], "install", ("spack.lock", "not valid JSON")),
], ids=["lock-a-list", "lock-specs-a-list", "lock-binary", "lock-truncated"])
def test_lock_that_is_not_one(world: World, monkeypatch, capsys, content: bytes, command: str,
                              names: tuple[str, ...]) -> None:
    (world.env / "spack.lock").write_bytes(content)
    args = world.mirror_args() if command == "mirror" else ("spack", command, "--env", "tiny")
    res = _run(world, monkeypatch, capsys, *args)
    assert_clean_failure(res, 2, *names)


def test_damaged_spack_site_configuration(world: World, tmp_path: Path, monkeypatch,
                                          capsys) -> None:
    """``mirror`` without --mirror reads Spack's site scope: a mirrors.yaml that
    is not YAML is named, not a traceback."""
    scope = tmp_path / "spack" / "etc" / "spack" / "site"
    scope.mkdir(parents=True)
    (scope / "mirrors.yaml").write_text("mirrors:\n  local: [unclosed\n")
    monkeypatch.setenv("SPACK_ROOT", str(tmp_path / "spack"))
    res = _run(world, monkeypatch, capsys, "spack", "mirror", "--env", "tiny")
    assert_clean_failure(res, 2, "mirrors.yaml", "not valid YAML")


@pytest.mark.parametrize("flag", ["mirror", "sources", "builtin"])
def test_a_file_where_a_directory_goes(world: World, monkeypatch, capsys, flag: str) -> None:
    res = _run(world, monkeypatch, capsys, *world.mirror_args(**{flag: world.afile}))
    assert_clean_failure(res, 2, f"--{flag} {world.afile}", "not a directory")
    assert not list(world.mirror.iterdir())


def test_sources_from_the_environment_variable_a_file(world: World, monkeypatch,
                                                      capsys) -> None:
    monkeypatch.setenv("HPCVAL_SPACK_SOURCES", str(world.afile))
    res = _run(world, monkeypatch, capsys, "spack", "mirror", "--env", "tiny", "--mirror",
               str(world.mirror), "--builtin", str(world.builtin))
    assert_clean_failure(res, 2, "$HPCVAL_SPACK_SOURCES", "not a directory")


def test_truncated_archive_in_the_mirror_is_named(world: World, monkeypatch, capsys) -> None:
    """A truncated OSU archive where Spack reads it: said, with both sums,
    exit 3 (it listed the archive as still to fetch and exited 0)."""
    target = world.mirror / "_source-cache" / "archive" / OSU_SHA[:2] / f"{OSU_SHA}.tar.gz"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"\x1f\x8b" + b"\0" * 998)
    res = _run(world, monkeypatch, capsys, *world.mirror_args())
    assert_clean_failure(res, 3, "could not be made here")
    wrong = [ln for ln in res.stdout.splitlines() if ln.startswith("wrong: ")]
    assert wrong and str(target) in wrong[0] and f"expected {OSU_SHA}" in wrong[0], res.stdout
    assert "truncated" in wrong[0]
    assert target.read_bytes() == b"\x1f\x8b" + b"\0" * 998, "the file was changed"


def test_sources_folder_missing(world: World, monkeypatch, capsys) -> None:
    """A --sources folder that does not exist: the sources it would hold are
    listed as missing clones (none here: OSU needs network), exit as the
    mirror's state says."""
    res = _run(world, monkeypatch, capsys,
               *world.mirror_args(sources=world.root / "no-such-sources"))
    assert res.returncode == 0, res.output
    assert "needs network: osu-micro-benchmarks@7.5.2" in res.stdout


def test_mirror_without_spack_or_mirror_says_what_to_give(world: World, monkeypatch,
                                                           capsys) -> None:
    res = _run(world, monkeypatch, capsys, "spack", "mirror", "--env", "tiny")
    assert_clean_failure(res, 2, "--mirror", "$SPACK_ROOT is not set", "give --mirror DIR")
