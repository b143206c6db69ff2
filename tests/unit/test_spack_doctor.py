"""``hpcval spack doctor`` and the environment files, on the real spack.yaml and spack.lock of
environments/ and the real MPI, Slurm and compilers of this machine; no Spack needed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from spack_locks import root_mpi_pairs

from hpcval import spack
from hpcval.core.paths import project_root
from hpcval.spack import preinstall

ROOT = project_root()
ENVIRONMENTS = spack.environment_names(ROOT)
#: The target each system's environment declares (its real microarchitecture).
TARGETS = {"local": "x86_64_v3", "lab": "x86_64_v3", "gcp-c2-impi": "cascadelake",
           "onprem-ib": "icelake"}
MPI_BENCHMARKS = ("intel-mpi-benchmarks", "osu-micro-benchmarks", "hpcval-cfdio")
DEBIAN_OPENMPI = Path("/usr/bin/mpicc.openmpi")


def _copy(name: str, tmp_path: Path) -> Path:
    """environments/<name> and common/ in tmp_path, so the includes resolve."""
    envs = tmp_path / "environments"
    shutil.copytree(ROOT / "environments" / "common", envs / "common")
    shutil.copytree(ROOT / "environments" / name, envs / name,
                    ignore=shutil.ignore_patterns(".spack-env"))
    return envs / name


def _set_prefix(env_dir: Path, package: str, prefix: Path) -> None:
    manifest = env_dir / "spack.yaml"
    data = yaml.safe_load(manifest.read_text())
    data["spack"]["packages"][package]["externals"][0]["prefix"] = str(prefix)
    manifest.write_text(yaml.safe_dump(data))


@pytest.mark.parametrize("name", ENVIRONMENTS)
def test_every_environment_declares_its_target_and_its_roots_carry_it(name: str) -> None:
    env_dir = ROOT / "environments" / name
    target = spack.declared_target(env_dir)
    assert target == TARGETS[name]
    manifest = yaml.safe_load((env_dir / "spack.yaml").read_text())["spack"]
    assert {"arch": [f"target={target}"]} in manifest["definitions"]
    assert manifest["concretizer"]["targets"]["host_compatible"] is False
    assert manifest["concretizer"]["reuse"] is False
    for matrix in manifest["specs"]:
        assert "$arch" in matrix["matrix"][-1], f"{name}: a matrix without $arch"


@pytest.mark.parametrize("name", ENVIRONMENTS)
def test_every_environment_declares_its_compiler_as_a_nonbuildable_external(name: str) -> None:
    packages, _ = spack.packages_config(ROOT / "environments" / name)
    gcc = packages["gcc"]
    assert gcc["buildable"] is False
    (external,) = gcc["externals"]
    assert "languages:='c,c++,fortran'" in external["spec"]
    assert set(external["extra_attributes"]["compilers"]) == {"c", "cxx", "fortran"}


@pytest.mark.parametrize("name", ENVIRONMENTS)
def test_lock_is_committed_unless_it_records_the_checkouts_paths(name: str) -> None:
    env_dir = ROOT / "environments" / name
    ignored = subprocess.run(["git", "check-ignore", "-q", str(env_dir / "spack.lock")],
                             cwd=ROOT, check=False).returncode == 0
    assert ignored == spack.lock_is_made_here(env_dir)
    assert spack.lock_is_made_here(env_dir) == (name in ("local", "lab"))
    if not ignored:
        assert (env_dir / "spack.lock").is_file()


@pytest.mark.parametrize("name", ENVIRONMENTS)
def test_lock_names_the_target_and_every_mpi_benchmark_pair(name: str) -> None:
    env_dir = ROOT / "environments" / name
    if spack.lock_is_made_here(env_dir) and not (env_dir / "spack.lock").is_file():
        pytest.skip(f"{spack.missing_lock(env_dir)}: needs Spack")
    lock = spack.read_lock(env_dir)
    assert spack.wrong_targets(lock, TARGETS[name]) == []
    manifest = yaml.safe_load((env_dir / "spack.yaml").read_text())["spack"]
    mpis = next(d["mpis"] for d in manifest["definitions"] if "mpis" in d)
    pairs = root_mpi_pairs(lock)
    for mpi in mpis:
        for bench in MPI_BENCHMARKS:
            assert (bench, mpi.split("@")[0]) in pairs, f"{name}: no {bench} ^{mpi} in the lock"
    roots = {n["name"] for n in spack.lock_roots(lock)}
    assert {"stream", "hpcg"} <= roots  # the STREAM and HPCG checks run them


@pytest.mark.skipif(not DEBIAN_OPENMPI.exists(), reason="Debian's Open MPI is not installed "
                    "(make system-deps)")
def test_local_externals_and_compiler_hold_what_they_claim_here() -> None:
    env_dir = ROOT / "environments" / "local"
    problems = [p for p in spack.check_declared(env_dir) if spack.VENV_MPI_INCLUDE not in p]
    assert problems == []


def test_missing_external_prefix_and_contents_are_named(tmp_path: Path) -> None:
    env_dir = _copy("lab", tmp_path)
    empty = tmp_path / "empty"
    (empty / "bin").mkdir(parents=True)
    _set_prefix(env_dir, "openmpi", empty)
    _set_prefix(env_dir, "slurm", tmp_path / "nowhere")
    problems = spack.check_declared(env_dir)
    text = "\n".join(problems)
    assert f"external openmpi@4.1.4 fabrics=ucx schedulers=slurm (prefix {empty}): no " \
           f"{empty}/bin/mpicc" in text
    assert "no libmpi.so*" in text
    assert f"(prefix {tmp_path / 'nowhere'}): prefix does not exist" in text
    assert all(line.startswith(str(env_dir / "spack.yaml")) or spack.VENV_MPI_INCLUDE in line
               for line in problems)
    assert all("\n" not in line for line in problems)


@pytest.mark.skipif(not DEBIAN_OPENMPI.exists() or not Path("/usr/bin/mpicc").exists(),
                    reason="Debian's Open MPI is not installed (make system-deps)")
def test_mpi_prefix_holding_another_mpi_is_named() -> None:
    # /usr/bin/mpicc is whichever MPI Debian's alternatives chose
    owner = "openmpi" if "Open MPI" in (preinstall._run_probe(Path("/usr/bin/mpicc"),
                                                               ["--showme:version"]) or "") \
        else None
    claim = "mpich" if owner == "openmpi" else "openmpi"
    problems = spack.check_external(claim, f"{claim}@4.1.4", "/usr", "spack.yaml")
    assert any("is not" in p and "wrapper" in p for p in problems), problems


def test_compiler_of_another_version_or_without_fortran_is_named(tmp_path: Path) -> None:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no gcc on this machine")
    problems = spack.check_compiler("gcc@1.2.3 languages:='c,fortran'", "/usr",
                                    {"c": gcc}, "spack.yaml")
    assert any(f"{gcc} is version" in p and "not 1.2.3" in p for p in problems)
    assert any("no fortran compiler" in p for p in problems)
    missing = spack.check_compiler("gcc@12.2.0 languages:='c'", "/x",
                                   {"c": str(tmp_path / "gcc")}, "spack.yaml")
    assert missing == [f"spack.yaml: compiler gcc@12.2.0 languages:='c' (prefix /x): c "
                       f"compiler {tmp_path / 'gcc'} does not exist"]


def test_missing_generated_include_says_hpcval_spack_externals(tmp_path: Path) -> None:
    env_dir = _copy("local", tmp_path)
    (env_dir / spack.VENV_MPI_INCLUDE).unlink(missing_ok=True)
    _, problems = spack.packages_config(env_dir)
    assert problems == [f"{env_dir / spack.VENV_MPI_INCLUDE}: included by "
                        f"{env_dir / 'spack.yaml'} but missing (run `hpcval spack externals`: "
                        "`make setup` runs it only when it builds the venv)"]


def test_missing_sources_are_named_with_url_and_sha256() -> None:
    imb = ("acee02cc719a74e6853194576cb7e6bf1fdc74f8971578e1b2141306c3c19477")
    report = {"local": ["/srv/mirror"], "remote": [], "cache": "/c", "sources": [
        {"spec": "intel-mpi-benchmarks@2021.7", "kind": "URLFetchStrategy", "sha256": imb,
         "url": "https://github.com/intel/mpi-benchmarks/archive/refs/tags/IMB-v2021.7.tar.gz",
         "paths": [f"_source-cache/archive/ac/{imb}.tar.gz"], "found": []},
        {"spec": "compiler-wrapper@1.1.0", "kind": "URLFetchStrategy", "sha256": "a07b",
         "url": "https://x/compiler-wrapper-1.1.0.tar.gz", "paths": ["p"],
         "found": ["/srv/mirror/p"]},
        {"spec": "stream@5.10", "kind": "GitFetchStrategy", "sha256": None,
         "url": "https://github.com/jeffhammond/STREAM.git",
         "paths": ["stream/stream-5.10.tar.gz"], "found": []}]}
    assert spack.source_problems(report) == [
        "missing source: intel-mpi-benchmarks@2021.7: https://github.com/intel/mpi-benchmarks/"
        f"archive/refs/tags/IMB-v2021.7.tar.gz (sha256 {imb}); belongs at <mirror>/"
        f"_source-cache/archive/ac/{imb}.tar.gz (/srv/mirror)",
        "missing source: stream@5.10: https://github.com/jeffhammond/STREAM.git "
        "(GitFetchStrategy no checksum or commit); belongs at <mirror>/stream/stream-5.10.tar.gz"
        " (/srv/mirror)"]


def test_doctor_cli_exit_codes(monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    from hpcval import cli

    assert cli.main(["spack", "doctor", "--env", "no-such-system"]) == 2
    assert "no such Spack environment" in capsys.readouterr().err
    # without Spack the declared externals are still checked; the mirror cannot be
    monkeypatch.setenv("SPACK_ROOT", "/nonexistent")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert cli.main(["spack", "doctor", "--env", "gcp-c2-impi"]) == 3
    out = capsys.readouterr().out
    if not Path("/opt/intel/oneapi").exists():
        assert "external intel-oneapi-mpi@2021.17.2 (prefix /opt/intel/oneapi): prefix does " \
               "not exist" in out
    assert spack.NOT_FOUND in out


def test_a_lock_made_in_another_checkout_is_named(tmp_path: Path) -> None:
    """Spack installs a lock as it is: a lock whose externals or developed trees are
    not where this checkout declares them would build against what is not here."""
    env_dir = _copy("local", tmp_path)
    # an environment that develops hpcval-cfdio from the checkout (local did so once)
    manifest = yaml.safe_load((env_dir / "spack.yaml").read_text())
    manifest["spack"]["develop"] = {"hpcval-cfdio": {"spec": "hpcval-cfdio", "path": "../.."}}
    (env_dir / "spack.yaml").write_text(yaml.safe_dump(manifest))
    (env_dir / spack.VENV_MPI_INCLUDE).write_text(yaml.safe_dump({"packages": {
        "intel-oneapi-mpi": {"buildable": False, "externals": [
            {"spec": "intel-oneapi-mpi@2021.18.1", "prefix": str(tmp_path / "venv")}]}}}))
    here = str((tmp_path / "environments" / "local" / ".." / "..").resolve())

    def lock(mpi_prefix: str, dev_path: str) -> dict:
        return {"concrete_specs": {
            "a": {"name": "intel-oneapi-mpi", "external": {"path": mpi_prefix}},
            "b": {"name": "glibc", "external": {"path": "/usr"}},  # from the compiler
            "c": {"name": "openmpi", "external": {"path": "/usr"}},
            "d": {"name": "hpcval-cfdio", "parameters": {"dev_path": dev_path}}}}

    assert spack.paths_made_elsewhere(env_dir, lock(str(tmp_path / "venv"), here)) == []
    found = spack.paths_made_elsewhere(env_dir, lock("/elsewhere/venv", "/elsewhere"))
    assert found == [f"external intel-oneapi-mpi at /elsewhere/venv, declared here: "
                     f"{tmp_path / 'venv'}",
                     f"hpcval-cfdio developed from /elsewhere, here from {here}"]


def test_a_missing_lock_made_on_each_machine_says_so(tmp_path: Path) -> None:
    env_dir = _copy("local", tmp_path)
    (env_dir / "spack.lock").unlink(missing_ok=True)
    with pytest.raises(spack.InputError) as err:
        spack.read_lock(env_dir)
    assert str(err.value) == (
        f"{env_dir / 'spack.lock'}: missing: run `hpcval spack lock --env local` (this "
        "environment's lock records this checkout's paths, so it is made on each machine and "
        "not committed)")
    assert spack.missing_lock(ROOT / "environments" / "onprem-ib").endswith(
        "`hpcval spack lock --env onprem-ib`")
