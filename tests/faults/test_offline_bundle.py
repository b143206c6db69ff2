"""The offline bundle (``hpcval offline bundle``, ``make setup/system-deps BUNDLE=DIR``) and
the mirror's manifest as a careless user meets them: a truncated STREAM archive (Spack
declares no checksum for it) caught by the doctor with both sums, a bundle damaged in
transit refused before anything is installed, wheels of another platform named, wrong
flags refused with one line and exit 2 (docs/spack.md, sections 1 and 5).

Everything here runs offline and in seconds, except the one test that downloads a foreign
platform's wheels from PyPI: it is skipped under CI and where PyPI cannot be reached."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hpcval.offline import wheels
from hpcval.offline.bundle import BUNDLE_FILE, check_sums, write_sums
from hpcval.spack import builds, mirror

from .conftest import ROOT, assert_clean_failure, make_checkout, run_inprocess

pytestmark = pytest.mark.integration

STREAM_LOCK = {"_meta": {"lockfile-version": 6},
               "roots": [{"hash": "sss", "spec": "stream"}],
               "concrete_specs": {"sss": {"name": "stream", "version": "5.10",
                                          "namespace": "builtin",
                                          "arch": {"target": "x86_64_v3"}}}}


def _repository(where: Path) -> Path:
    """A real git repository with a stream.c, its one commit the archive's."""
    repo = where / "STREAM"
    repo.mkdir()
    (repo / "stream.c").write_text("int main(void) { return 0; }\n" * 200)
    env = {**os.environ, "GIT_AUTHOR_DATE": "2025-02-17T18:41:52+02:00",
           "GIT_COMMITTER_DATE": "2025-02-17T18:41:52+02:00"}
    for cmd in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t",
                                               "commit", "-qm", "stream"]):
        subprocess.run(["git", "-C", str(repo), *cmd], check=True, env=env)
    return repo


def _tiny_checkout(tmp_path: Path, spack_yaml: str, lock: dict) -> Path:
    """A checkout whose environment ``tiny`` holds ``spack_yaml`` and ``lock``; Spack
    must not be installed (these cases are about a machine without it)."""
    if builds.find_spack() is not None:
        pytest.skip("Spack is installed here: these cases are about a machine without it")
    root = make_checkout(tmp_path)
    shutil.copytree(ROOT / "environments", root / "environments")
    env = root / "environments" / "tiny"
    env.mkdir()
    (env / "spack.yaml").write_text(spack_yaml)
    (env / "spack.lock").write_text(json.dumps(lock))
    return root


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A checkout with an environment holding STREAM alone (locked), and Spack's site
    scope naming a local mirror that holds STREAM's archive and its manifest."""
    root = _tiny_checkout(tmp_path, "spack:\n  specs: [stream]\n  packages:\n    all:\n"
                          "      require:\n      - target=x86_64_v3\n", STREAM_LOCK)
    spack_root = tmp_path / "spack"
    scope = spack_root / "etc" / "spack" / "site"
    scope.mkdir(parents=True)
    mirror_dir = tmp_path / "mirror"
    (scope / "mirrors.yaml").write_text(
        f"mirrors::\n  local-sources:\n    url: file://{mirror_dir}\n    signed: false\n")
    monkeypatch.setenv("SPACK_ROOT", str(spack_root))
    # the archive as `hpcval spack mirror` makes it: no checksum in Spack's package, so
    # the manifest holds its sha256
    src = mirror.Source("stream", "5.10", None, "https://github.com/jeffhammond/STREAM.git",
                        tmp_path / "package.py")
    _repository(tmp_path)
    made = mirror.make_mirror([src], mirror_dir, tmp_path,
                              {"stream": mirror.Recipe("x/STREAM", "HEAD", "stream-5.10/")})
    assert made.made and src.mirror_path() in made.sums, made
    mirror.write_manifest(mirror_dir, made.sums)
    return {"root": root, "mirror": mirror_dir, "archive": mirror_dir / src.mirror_path()}


def test_a_truncated_stream_archive_is_named_by_the_doctor_with_both_sums(
        site: dict[str, Path], monkeypatch, capsys) -> None:
    """Spack's stream@5.10 has no checksum: before the manifest the doctor passed a
    2,000-byte STREAM archive; now it is named with the manifest's sum and its own."""
    archive = site["archive"]
    whole = archive.read_bytes()
    expected = mirror.read_manifest(site["mirror"])["stream/stream-5.10.tar.gz"]
    assert expected == mirror.sha256_of(archive)
    res = run_inprocess(site["root"], "spack", "doctor", "--env", "tiny",
                        monkeypatch=monkeypatch, capsys=capsys)
    assert str(archive) not in res.stdout, res.output  # whole: nothing said of it

    archive.write_bytes(whole[:len(whole) // 2])
    actual = mirror.sha256_of(archive)
    res = run_inprocess(site["root"], "spack", "doctor", "--env", "tiny",
                        monkeypatch=monkeypatch, capsys=capsys)
    assert_clean_failure(res, 3, "problems in", "tiny")
    named = [ln for ln in res.stdout.splitlines() if str(archive) in ln]
    assert len(named) == 1, res.stdout
    assert f"sha256 {actual}" in named[0] and f"expected by SHA256SUMS {expected}" in named[0]
    assert "truncated" in named[0]


def test_an_archive_listed_in_the_manifest_but_gone_is_named(site: dict[str, Path],
                                                             monkeypatch, capsys) -> None:
    site["archive"].unlink()
    res = run_inprocess(site["root"], "spack", "doctor", "--env", "tiny",
                        monkeypatch=monkeypatch, capsys=capsys)
    assert res.returncode == 3, res.output
    assert f"{site['archive']}: missing (listed in {site['mirror'] / 'SHA256SUMS'})" \
        in res.stdout


def test_a_manifest_that_is_not_one_is_named(site: dict[str, Path], monkeypatch,
                                             capsys) -> None:
    (site["mirror"] / "SHA256SUMS").write_text("deadbeef  ../../etc/passwd\n")
    res = run_inprocess(site["root"], "spack", "doctor", "--env", "tiny",
                        monkeypatch=monkeypatch, capsys=capsys)
    assert_clean_failure(res, 2, "SHA256SUMS", "line 1", "hpcval spack mirror")


def test_the_manifest_keeps_the_other_archives_lines(tmp_path: Path) -> None:
    mirror.write_manifest(tmp_path, {"a/a.tar.gz": "1" * 64})
    mirror.write_manifest(tmp_path, {"b/b.tar.gz": "2" * 64})
    assert mirror.read_manifest(tmp_path) == {"a/a.tar.gz": "1" * 64, "b/b.tar.gz": "2" * 64}


# -- the bundle: flags, sums ---------------------------------------------------------

@pytest.mark.parametrize("flags, names", [
    (["--platform", "x86_64"], ("--platform x86_64", "not a wheel platform tag")),
    (["--python-version", "3"], ("--python-version 3", "MAJOR.MINOR")),
    (["--release", "no-such-release"], ("--release no-such-release", "--no-debs")),
    (["--env", "nosuch"], ("--env nosuch", "no such Spack environment")),
], ids=["platform", "python-version", "release", "env"])
def test_bundle_refuses_wrong_flags_and_makes_nothing(tmp_path: Path, monkeypatch, capsys,
                                                      flags: list[str],
                                                      names: tuple[str, ...]) -> None:
    root = make_checkout(tmp_path)
    shutil.copytree(ROOT / "environments", root / "environments")
    args = {"--env": "local", "--platform": "manylinux_2_28_x86_64",
            "--python-version": "3.11", "--out": str(tmp_path / "b")}
    args.update(dict(zip(flags[::2], flags[1::2], strict=True)))
    res = run_inprocess(root, "offline", "bundle", *[a for kv in args.items() for a in kv],
                        monkeypatch=monkeypatch, capsys=capsys)
    assert_clean_failure(res, 2, *names)
    assert not (tmp_path / "b").exists()


def test_bundle_never_writes_into_a_folder_that_is_not_a_bundle(tmp_path: Path, monkeypatch,
                                                                 capsys) -> None:
    root = make_checkout(tmp_path)
    shutil.copytree(ROOT / "environments", root / "environments")
    out = tmp_path / "full"
    out.mkdir()
    (out / "thesis.tex").write_text("mine\n")
    res = run_inprocess(root, "offline", "bundle", "--env", "local", "--platform",
                        "manylinux_2_28_x86_64", "--python-version", "3.11", "--out", str(out),
                        monkeypatch=monkeypatch, capsys=capsys)
    assert_clean_failure(res, 2, f"--out {out}", "not a bundle", BUNDLE_FILE)
    assert [p.name for p in out.iterdir()] == ["thesis.tex"]


def _tiny_bundle(where: Path) -> Path:
    (where / "wheels").mkdir(parents=True)
    (where / "wheels" / "x-1.0-py3-none-any.whl").write_bytes(b"PK\x05\x06" + b"\0" * 18)
    (where / BUNDLE_FILE).write_text("{}\n")
    write_sums(where)
    return where


def test_make_setup_refuses_a_bundle_damaged_in_transit(tmp_path: Path) -> None:
    """SHA256SUMS is checked before the venv is made: a changed wheel stops `make setup`
    with the file named, and no venv is left."""
    bundle = _tiny_bundle(tmp_path / "bundle")
    assert check_sums(bundle) == []
    (bundle / "wheels" / "x-1.0-py3-none-any.whl").write_bytes(b"PK")
    assert "x-1.0-py3-none-any.whl" in check_sums(bundle)[0]
    venv = tmp_path / "venv"
    proc = subprocess.run(["make", "-C", str(ROOT), "setup", f"BUNDLE={bundle}",
                           f"VENV={venv}"], capture_output=True, text=True, check=False)
    assert proc.returncode != 0, proc.stdout
    assert "x-1.0-py3-none-any.whl: FAILED" in proc.stdout + proc.stderr
    assert not venv.exists()


def test_make_setup_refuses_a_bundle_for_another_python(tmp_path: Path) -> None:
    """A bundle's wheels are for the Python it was made for: `make setup` with another
    says which to give, exit 2, before it makes the venv."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / BUNDLE_FILE).write_text(json.dumps({"python_version": "3.99"}) + "\n")
    write_sums(bundle)
    venv = tmp_path / "venv"
    proc = subprocess.run(["make", "-C", str(ROOT), "setup", f"BUNDLE={bundle}",
                           f"VENV={venv}", f"PYTHON={sys.executable}"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert f"holds wheels for Python 3.99, {sys.executable} is Python {here}: give " \
           f"PYTHON=python3.99, or a bundle made with --python-version {here}" in proc.stderr
    assert not venv.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="make system-deps needs root")
def test_make_system_deps_on_a_bundle_without_debian_packages(tmp_path: Path) -> None:
    """A bundle made with --no-debs, on a machine lacking a package: named, exit 2,
    nothing asked of apt."""
    bundle = _tiny_bundle(tmp_path / "bundle")
    proc = subprocess.run(["make", "-C", str(ROOT), "system-deps", f"BUNDLE={bundle}",
                           "SYSTEM_PACKAGES=hpcval-no-such-package"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "has no debs/Packages (made with --no-debs?)" in proc.stderr


def test_wheels_of_another_platform_are_named(tmp_path: Path) -> None:
    """Wheel tags against the target's (packaging.tags): an x86_64 wheel or one for
    another Python is no wheel for a Python 3.12 aarch64 target; pure and abi3 wheels
    and older manylinux tags are."""
    names = {"numpy-2.3.0-cp312-cp312-manylinux_2_17_aarch64.manylinux2014_aarch64.whl": True,
             "cftime-1.6.6-cp311-abi3-manylinux_2_17_aarch64.whl": True,
             "pyyaml-6.0-py3-none-any.whl": True,
             "numpy-2.3.0-cp312-cp312-manylinux_2_17_x86_64.whl": False,
             "numpy-2.3.0-cp311-cp311-manylinux_2_17_aarch64.whl": False,
             "clingo-5.8.3-cp312-cp312-manylinux_2_31_aarch64.whl": False}
    for name in names:
        (tmp_path / name).write_bytes(b"")
    wrong = wheels.foreign_wheels(tmp_path, "manylinux2014_aarch64", "3.12")
    assert sorted(w.split(":")[0] for w in wrong) == sorted(n for n, ok in names.items()
                                                             if not ok)
    assert wheels.platforms("manylinux2014_aarch64")[0] == "manylinux_2_17_aarch64"


def _pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


def _interpreter(version: str) -> str | None:
    """A Python of *version* that runs here (on PATH, or one of pyenv's), if any."""
    candidates = [shutil.which(f"python{version}"),
                  *map(str, sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python3")))]
    for python in filter(None, candidates):
        if subprocess.run([python, "-c", ""], capture_output=True, check=False).returncode == 0:
            return python
    return None


@pytest.mark.skipif(bool(os.environ.get("CI")), reason="downloads from PyPI: not run in CI")
def test_a_bundle_for_another_platform_resolves_there(tmp_path: Path) -> None:
    """hpcval's whole stack for Python 3.12 on manylinux_2_28_x86_64, downloaded by
    another Python (this one): every wheel's tags are the target's, and pip resolves the
    whole requirement set from those wheels alone for that target. (Not aarch64: Intel
    MPI's wheels are x86_64 only; that bundle names impi-rt and exits 3.)"""
    if not _pypi_reachable():
        pytest.skip("PyPI unreachable: this test downloads the foreign platform's wheels")
    platform = "manylinux_2_28_x86_64"
    version = "3.12" if sys.version_info[:2] != (3, 12) else "3.13"
    reqs = wheels.requirements(ROOT / "pyproject.toml")
    names = wheels.download(reqs, tmp_path / "wheels", platform, version)
    tag = f"cp{version.replace('.', '')}"
    assert any(f"-{tag}-" in n for n in names), names
    assert wheels.foreign_wheels(tmp_path / "wheels", platform, version) == []
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-",
         "--no-index", "--find-links", str(tmp_path / "wheels"), "--only-binary=:all:",
         *[f"--platform={p}" for p in wheels.platforms(platform)],
         "--python-version", version, "--implementation", "cp",
         "--target", str(tmp_path / "target"), *reqs],
        capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    installed = {i["metadata"]["name"].lower() for i in json.loads(proc.stdout)["install"]}
    assert {"reframe-hpc", "scipy", "netcdf4", "impi-rt", "clingo"} <= installed, installed
    # where an interpreter of the target's version is at hand, install for real, from the
    # bundle's wheels alone (pip's own configuration set aside), and run hpcval there
    python = _interpreter(version)
    if python is None:
        return
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--no-index", "--find-links",
         str(tmp_path / "wheels"), f"{ROOT}[impi,wrf,dev]", wheels.CLINGO],
        capture_output=True, text=True, check=False, env={**env, "PIP_CONFIG_FILE": "/dev/null"})
    assert done.returncode == 0, done.stderr
    ran = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import sys, scipy, netCDF4, clingo, reframe, hpcval.cli; "
                          "print(sys.version_info[:2])"], capture_output=True, text=True,
                         check=False)
    assert ran.returncode == 0 and ran.stdout.strip() == str(tuple(map(int, version.split(".")))), \
        ran.stderr


IOR_PY = '''
class Ior(AutotoolsPackage):
    url = "https://github.com/hpc/ior/releases/download/4.0.0/ior-4.0.0.tar.gz"
    version("4.0.0", sha256="''' + "c" * 64 + '''")
    version("3.3.0", sha256="''' + "d" * 64 + '''")
    patch("https://example.org/a.patch", sha256="''' + "a" * 64 + '''", when="@3.2.0 +hdf5")
    patch("https://example.org/b.patch", sha256="''' + "b" * 64 + '''", when="+lustre @:3")
    patch("https://example.org/e.patch", sha256="''' + "e" * 64 + '''", when="%gcc@9:")
'''


def test_an_unlocked_environment_takes_the_pinned_versions_and_their_patches(
        tmp_path: Path) -> None:
    """`local` is locked on the target: the bundle takes pins.yaml's versions of the
    packages the environment names, and only the patches whose version range allows
    them (a compiler condition is not known before the lock: kept)."""
    from hpcval.offline.bundle import pinned_sources

    envs = tmp_path / "environments"
    (envs / "common").mkdir(parents=True)
    (envs / "common" / "pins.yaml").write_text(
        'packages:\n  ior:\n    require: "@4.0.0"\n  wrf:\n    require: "@4.3.3"\n')
    (envs / "e").mkdir()
    (envs / "e" / "spack.yaml").write_text("spack:\n  specs: [ior]\n")
    builtin = tmp_path / "builtin"
    for name, text in (("ior", IOR_PY), ("compiler_wrapper", 'class CompilerWrapper(Package):\n'
                       '    url = "https://x/compiler-wrapper-1.1.0.tar.gz"\n'
                       '    version("1.0", sha256="' + "1" * 64 + '")\n'
                       '    version("1.1.0", sha256="' + "2" * 64 + '")\n')):
        (builtin / "packages" / name).mkdir(parents=True)
        (builtin / "packages" / name / "package.py").write_text(text)
    found = {(s.label, s.sha256) for s in pinned_sources(envs / "e", builtin)}
    assert found == {("ior@4.0.0", "c" * 64), ("ior@4.0.0 (patch)", "e" * 64),
                     ("compiler-wrapper@1.1.0", "2" * 64)}, found


def test_spack_mirror_writes_the_manifest_of_what_it_made(tmp_path: Path, monkeypatch,
                                                          capsys) -> None:
    """`hpcval spack mirror` adds every archive it made, verified against its package's
    sha256, to the mirror's SHA256SUMS (the doctor's manifest); a second run keeps it."""
    root = _tiny_checkout(tmp_path, "spack:\n  specs: [intel-mpi-benchmarks]\n", {
        "_meta": {"lockfile-version": 6}, "roots": [{"hash": "i", "spec": "imb"}],
        "concrete_specs": {"i": {"name": "intel-mpi-benchmarks", "version": "1.0",
                                 "namespace": "builtin", "arch": {"target": "x86_64_v3"}}}})
    sources = tmp_path / "sources"
    sources.mkdir()
    repo = _repository(sources)
    repo.rename(sources / "mpi-benchmarks")
    repo = sources / "mpi-benchmarks"
    subprocess.run(["git", "-C", str(repo), "tag", "IMB-v1.0"], check=True)
    whole = tmp_path / "whole.tar.gz"
    mirror.git_archive(repo, "IMB-v1.0", "mpi-benchmarks-IMB-v1.0/", whole)
    digest = mirror.sha256_of(whole)
    builtin = tmp_path / "builtin"
    (builtin / "packages" / "intel_mpi_benchmarks").mkdir(parents=True)
    (builtin / "packages" / "intel_mpi_benchmarks" / "package.py").write_text(
        'class IntelMpiBenchmarks(MakefilePackage):\n'
        '    url = "https://github.com/intel/mpi-benchmarks/archive/IMB-v2021.7.tar.gz"\n'
        f'    version("1.0", sha256="{digest}")\n')
    args = ("spack", "mirror", "--env", "tiny", "--mirror", str(tmp_path / "m"), "--sources",
            str(sources), "--builtin", str(builtin))
    for _ in range(2):
        res = run_inprocess(root, *args, monkeypatch=monkeypatch, capsys=capsys)
        assert res.returncode == 0, res.output
        assert "manifest: " in res.stdout and "(1 archives with their sha256)" in res.stdout
        assert mirror.read_manifest(tmp_path / "m") == {
            f"_source-cache/archive/{digest[:2]}/{digest}.tar.gz": digest}


def test_published_archives_enter_the_bundle_only_with_their_sha256(tmp_path: Path) -> None:
    """OSU's and HPCG's archives are fetched where the machine can (here: a server on the
    loopback): one with its package's sha256 goes into the mirror and its manifest, one
    that is not (a page instead of the archive) is named with both sums and left out, one
    that cannot be fetched is named with the URL and where it belongs."""
    import functools
    import http.server
    import threading

    from hpcval.offline.bundle import BundleResult, published_archives

    served = tmp_path / "served"
    served.mkdir()
    (served / "osu.tar.gz").write_bytes(b"\x1f\x8b" + b"osu" * 500)
    (served / "hpcg.tar.gz").write_bytes(b"<html>moved</html>")
    good = mirror.sha256_of(served / "osu.tar.gz")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        sources = [mirror.Source("osu-micro-benchmarks", "7.5.2", good, f"{base}/osu.tar.gz",
                                 tmp_path / "p.py"),
                   mirror.Source("hpcg", "3.1", "3" * 64, f"{base}/hpcg.tar.gz", tmp_path / "p.py"),
                   mirror.Source("hpcg", "3.1", "7" * 64, f"{base}/gone.patch", tmp_path / "p.py",
                                 "patch")]
        result = BundleResult()
        sums = published_archives(sources, tmp_path / "m", result)
    finally:
        server.shutdown()
        server.server_close()
    assert sums == {sources[0].mirror_path(): good}
    assert mirror.sha256_of(tmp_path / "m" / sources[0].mirror_path()) == good
    assert not (tmp_path / "m" / sources[1].mirror_path()).exists()
    wrong, gone = result.optional_missing
    assert wrong.startswith("hpcg@3.1: ") and "3" * 64 in wrong \
        and mirror.sha256_of(served / "hpcg.tar.gz") in wrong, wrong
    assert gone.startswith("hpcg@3.1 (patch): not fetched from") and "404" in gone \
        and sources[2].mirror_path() in gone, gone
    assert not [p for p in (tmp_path / "m").rglob(".part-*")]


def test_a_second_mirror_run_without_the_clone_keeps_the_listed_stream(tmp_path: Path,
                                                                       monkeypatch,
                                                                       capsys) -> None:
    """Run again into the same bundle or mirror without `--sources`: STREAM (no checksum in
    Spack's package) was named `no clone`, exit 3, though its archive was there with the
    manifest's sha256; now it is kept by that sum. A changed copy is still named."""
    root = _tiny_checkout(tmp_path, "spack:\n  specs: [stream]\n", STREAM_LOCK)
    sources = tmp_path / "sources"
    sources.mkdir()
    _repository(sources)
    builtin = tmp_path / "builtin"
    (builtin / "packages" / "stream").mkdir(parents=True)
    (builtin / "packages" / "stream" / "package.py").write_text(
        'class Stream(MakefilePackage):\n'
        '    git = "https://github.com/jeffhammond/STREAM.git"\n'
        '    version("5.10")\n')
    monkeypatch.setattr(mirror, "RECIPES",
                        {"stream": mirror.Recipe("x/STREAM", "HEAD", "stream-5.10/")})
    mirror_dir = tmp_path / "m"
    args = ("spack", "mirror", "--env", "tiny", "--mirror", str(mirror_dir), "--builtin",
            str(builtin), "--sources")
    res = run_inprocess(root, *args, str(sources), monkeypatch=monkeypatch, capsys=capsys)
    assert res.returncode == 0, res.output
    listed = mirror.read_manifest(mirror_dir)
    assert list(listed) == ["stream/stream-5.10.tar.gz"], listed
    res = run_inprocess(root, *args, str(tmp_path / "none"), monkeypatch=monkeypatch,
                        capsys=capsys)
    assert res.returncode == 0, res.output
    assert "no clone here" in res.stdout and mirror.read_manifest(mirror_dir) == listed
    archive = mirror_dir / "stream" / "stream-5.10.tar.gz"
    archive.write_bytes(archive.read_bytes()[:40])  # cut short: no longer the listed one
    res = run_inprocess(root, *args, str(tmp_path / "none"), monkeypatch=monkeypatch,
                        capsys=capsys)
    assert_clean_failure(res, 3, "could not be made")
    assert "stream@5.10: no clone at" in res.stdout, res.output
