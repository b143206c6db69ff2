"""The Spack layer with the real Spack: concretize every environment, audit the
hpcval package repository, and show that one more MPI stack in a matrix yields
the benchmarks built against it. Skipped, with the reason, where Spack is absent.

Concretization is offline: the builtin repository, compilers and mirrors come
from the local Spack configuration (see docs/spack.md). Each environment is
concretized in a temporary copy, so the checkout's environments stay untouched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from spack_locks import root_mpi_pairs

from hpcval import spack
from hpcval.core.paths import project_root

needs_spack = pytest.mark.skipif(spack.find_spack() is None, reason=spack.NOT_FOUND)

ROOT = project_root()
ENVIRONMENTS = sorted(p.parent.name for p in (ROOT / "environments").glob("*/spack.yaml"))
CONCRETIZE_TIMEOUT = 1800


def _copy_environments(tmp_path: Path) -> Path:
    """environments/, spack-repo/ and proxies/ side by side in tmp_path, so the
    relative ``include:`` and ``repos:`` paths of each spack.yaml
    still resolve."""
    shutil.copytree(ROOT / "environments", tmp_path / "environments",
                    ignore=shutil.ignore_patterns("spack.lock", ".spack-env"))
    for name in ("spack-repo", "proxies"):
        (tmp_path / name).symlink_to(ROOT / name)
    missing = [p for p in (tmp_path / "environments").glob("*/spack.yaml")
               for include in (spack.VENV_MPI_INCLUDE, spack.STREAM_INCLUDE)
               if include in p.read_text() and not (p.parent / include).is_file()]
    assert not missing, (f"{spack.VENV_MPI_INCLUDE} or {spack.STREAM_INCLUDE} missing beside "
                         f"{missing}: run make setup (hpcval spack externals)")
    return tmp_path / "environments"


def _concretize(env_dir: Path) -> dict:
    proc = spack.run_spack(["concretize", "-f"], env_dir, timeout=CONCRETIZE_TIMEOUT)
    assert proc.returncode == 0, f"spack concretize failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads((env_dir / "spack.lock").read_text())


def _roots_with_dependency(lock: dict) -> set[tuple[str, str]]:
    """(root name, dependency name) for every root and each of its direct links."""
    specs = lock["concrete_specs"]
    pairs = set()
    for root in lock["roots"]:
        node = specs[root["hash"]]
        for dep in node.get("dependencies", []):
            pairs.add((node["name"], dep["name"]))
    return pairs


def test_every_system_has_an_environment() -> None:
    assert {"local", "lab", "gcp-c2-impi", "onprem-ib"} <= set(ENVIRONMENTS)
    for name in ENVIRONMENTS:
        text = (ROOT / "environments" / name / "spack.yaml").read_text()
        assert text.startswith("# System:"), f"{name}: header comment naming the system"
        assert "../common/pins.yaml" in text, f"{name}: shares the common pins"


def _tracked_state() -> str:
    """``git status`` of the files an environment is made of (empty when clean)."""
    proc = subprocess.run(["git", "status", "--porcelain", "--", "environments", "spack-repo",
                           "proxies"], cwd=ROOT, capture_output=True, text=True, check=False)
    return proc.stdout if proc.returncode == 0 else f"git status failed: {proc.stderr}"


@needs_spack
@pytest.mark.parametrize("system", ENVIRONMENTS)
def test_environment_concretizes_for_its_target_without_writing(system: str,
                                                               tmp_path: Path) -> None:
    """Concretized in a copy: Spack writes nothing into the manifest or its includes (no
    compiler or external detected on this host), every node is built for the declared
    target, and every MPI stack of the matrix has every MPI benchmark built against it."""
    before = _tracked_state()
    env_dir = _copy_environments(tmp_path) / system
    files = {p: p.read_bytes() for p in spack.manifest_files(env_dir) if p.is_file()}
    lock = _concretize(env_dir)
    assert {p: p.read_bytes() for p in files} == files, "Spack wrote into the environment"
    assert _tracked_state() == before
    target = spack.declared_target(env_dir)
    assert spack.wrong_targets(lock, target) == []
    versions = {n["name"]: n["version"] for n in spack.lock_roots(lock)}
    assert versions["intel-mpi-benchmarks"] == "2021.7"  # the common pin holds
    manifest = (env_dir / "spack.yaml").read_text()
    mpis = next(line for line in manifest.splitlines() if "- mpis:" in line)
    pairs = root_mpi_pairs(lock)
    for mpi in mpis.split("[", 1)[1].rstrip("]").split(","):
        for bench in ("intel-mpi-benchmarks", "osu-micro-benchmarks", "hpcval-cfdio"):
            assert (bench, mpi.strip().split("@")[0]) in pairs, f"no {bench} ^{mpi.strip()}"
    committed = ROOT / "environments" / system / "spack.lock"
    if committed.is_file() and not spack.lock_is_made_here(env_dir):
        _assert_only_host_changes(spack.diff_locks(spack.read_lock_file(committed), lock))


def _assert_only_host_changes(found: spack.LockDiff) -> None:
    """A re-lock at the pins against the committed lock (`hpcval spack lock --diff`): no
    spec change on a host of the lock's OS; elsewhere only what docs/spack.md says a lock
    takes from the host, the OS name and the libc (glibc's version and its external)."""
    report = "\n".join(found.lines())
    source = [c for c in found.changed if c.at_source]
    if not any("os" in c.aspects for c in source):
        assert found.spec_changes == 0, report
        return
    for change in source:
        allowed = {"os", "version", "external"} if change.label.startswith("glibc@") else {"os"}
        assert set(change.aspects) <= allowed, report
    assert not (found.added or found.removed or found.roots_added or found.roots_removed), report


@needs_spack
def test_new_mpi_stack_in_matrix_yields_benchmarks_built_against_it(tmp_path: Path) -> None:
    env_dir = _copy_environments(tmp_path) / "local"
    yaml_path = env_dir / "spack.yaml"
    text = yaml_path.read_text()
    old = "- mpis: [openmpi@4.1.4, intel-oneapi-mpi@2021.18]"
    assert old in text
    text = text.replace(old, "- mpis: [openmpi@4.1.4, intel-oneapi-mpi@2021.18, mpich@4.3.2]")
    text = text.replace("one_of: [openmpi, intel-oneapi-mpi]",
                        "one_of: [openmpi, intel-oneapi-mpi, mpich]")
    yaml_path.write_text(text)
    pairs = _roots_with_dependency(_concretize(env_dir))
    for bench in ("intel-mpi-benchmarks", "osu-micro-benchmarks", "hpcval-cfdio"):
        for mpi in ("openmpi", "intel-oneapi-mpi", "mpich"):
            assert (bench, mpi) in pairs, f"no {bench} built against {mpi}"


@needs_spack
def test_hpcval_repo_loads_and_passes_audit() -> None:
    repo = ROOT / "spack-repo" / "spack_repo" / "hpcval"
    packages = sorted(p.name.replace("_", "-") for p in (repo / "packages").iterdir()
                      if (p / "package.py").is_file())
    listed = spack.run_spack(["repo", "list"], ROOT / "environments" / "local", timeout=300)
    assert listed.returncode == 0, listed.stderr
    assert "hpcval" in listed.stdout
    if not packages:
        pytest.skip("no packages in the hpcval repository yet")
    audit = spack.run_spack(["audit", "packages", *packages], ROOT / "environments" / "local",
                            timeout=600)
    assert audit.returncode == 0, f"spack audit packages:\n{audit.stdout}\n{audit.stderr}"


def _style_tools() -> dict[str, str] | None:
    """PATH for ``spack style``: its tools (isort, black, flake8) beside the
    Python that runs Spack or on PATH; ``None`` where one is missing."""
    dirs = [str(Path(os.environ["SPACK_PYTHON"]).parent)] if os.environ.get("SPACK_PYTHON") else []
    path = os.pathsep.join([*dirs, os.environ.get("PATH", "")])
    if all(shutil.which(t, path=path) for t in ("isort", "black", "flake8")):
        return dict(os.environ, PATH=path)
    return None


@needs_spack
def test_hpcval_repo_passes_spack_style() -> None:
    env = _style_tools()
    if env is None:
        pytest.skip("spack style needs isort, black and flake8 (pip install them into the "
                    "Python that runs Spack, $SPACK_PYTHON)")
    files = sorted(str(p) for p in (ROOT / "spack-repo").rglob("*.py"))
    # mypy is left out: with a current mypy it reports only errors inside Spack itself
    proc = subprocess.run([str(spack.find_spack()), "-e", str(ROOT / "environments" / "local"),
                           "style", "--skip", "mypy", *files], capture_output=True, text=True,
                          env=env, timeout=600, check=False)
    assert proc.returncode == 0, f"spack style:\n{proc.stdout}\n{proc.stderr}"
    assert "spack style checks were clean" in proc.stdout + proc.stderr


def _run_cfdio_triad(cfdio: Path, env_vars: list[list[str]], mpirun: str) -> dict:
    from hpcval.parsers.cfdio import parse_cfdio

    environ = dict(os.environ)
    for name, value in env_vars:
        environ[name] = value.replace("$PATH", environ.get("PATH", "")).replace(
            "$LD_LIBRARY_PATH", environ.get("LD_LIBRARY_PATH", ""))
    proc = subprocess.run([mpirun, "-np", "1", str(cfdio), "--mode", "triad", "--triad-n",
                           "1000000", "--reps", "2"], capture_output=True, text=True,
                          env=environ, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return parse_cfdio(proc.stdout, str(cfdio))


@needs_spack
def test_spack_install_builds_hpcval_packages_against_every_mpi(tmp_path: Path) -> None:
    """spack install of hpcval's own packages in (a copy of) the local environment:
    one hpcval-cfdio per MPI stack of the matrix, each linked to its MPI and working."""
    env_dir = _copy_environments(tmp_path) / "local"
    _concretize(env_dir)
    proc = spack.run_spack(["install", "hpcval-cfdio"], env_dir, timeout=1800)
    try:
        assert proc.returncode == 0, f"spack install hpcval-cfdio:\n{proc.stdout}\n{proc.stderr}"
        found = spack.installed_prefixes(env_dir, ("hpcval-cfdio",))
        mpis = {}
        for _, prefix in found:
            nodes = spack.read_spec_json(prefix)
            mpi = spack.mpi_node(nodes)
            assert mpi is not None
            # built by version from the checkout's summed files, never from a shared tree
            assert "dev_path" not in nodes[0]["parameters"]
            assert nodes[0]["version"] == (ROOT / "proxies/cfdio/VERSION").read_text().strip()
            mpis[mpi["name"]] = prefix
        assert set(mpis) == {"openmpi", "intel-oneapi-mpi"}
        # nothing changed: a second install builds nothing (the two builds once shared a
        # developed tree and each made the other look changed)
        again = spack.run_spack(["install", "hpcval-cfdio"], env_dir, timeout=600)
        assert again.returncode == 0 and "Installing hpcval-cfdio" not in \
            again.stdout + again.stderr, again.stdout
        libmpi = {"openmpi": "libmpi.so.40", "intel-oneapi-mpi": "libmpi.so.12"}
        for name, prefix in mpis.items():
            linked = subprocess.run(["ldd", str(prefix / "bin" / "cfdio")], capture_output=True,
                                    text=True, check=False).stdout
            assert libmpi[name] in linked, f"{name}: cfdio not linked to its MPI:\n{linked}"
    finally:
        spack.run_spack(["uninstall", "-y", "--all", "hpcval-cfdio"], env_dir, timeout=600)


def _local_spack_environments() -> dict[str, dict]:
    from hpcval.rfm.site import spack_environments

    envs = {e["name"]: e for e in spack_environments("local")}
    if "spack-openmpi" not in envs or "cfdio" not in envs["spack-openmpi"]["features"]:
        pytest.skip("hpcval-cfdio ^openmpi not installed in environments/local "
                    "(spack -e environments/local install hpcval-cfdio)")
    return envs


@needs_spack
def test_local_site_offers_spack_built_programs() -> None:
    env = _local_spack_environments()["spack-openmpi"]
    assert env["extras"]["mpi_stack"] == "openmpi@4.1.4 (spack:local)"
    cfdio = env["extras"]["spack"]["hpcval-cfdio"]
    version = (ROOT / "proxies" / "cfdio" / "VERSION").read_text().strip()
    assert cfdio["spec"].startswith(f"hpcval-cfdio@{version} ")
    assert "^openmpi@4.1.4" in cfdio["spec"]
    assert Path(cfdio["prefix"], "bin", "cfdio").is_file()
    assert env["env_vars"][0][1].startswith(str(Path(cfdio["prefix"], "bin")))
    result = _run_cfdio_triad(Path(cfdio["prefix"], "bin", "cfdio"), env["env_vars"],
                              env["extras"]["mpirun"])
    assert result["valid"] == 1
    if "imb" in env["features"]:
        imb = env["extras"]["spack"]["intel-mpi-benchmarks"]
        assert imb["spec"].startswith("intel-mpi-benchmarks@2021.7")
        assert env["extras"]["spec"] == imb["spec"]
        assert Path(imb["prefix"], "bin", "IMB-MPI1").is_file()


@needs_spack
def test_checks_run_the_spack_built_programs_unchanged(tmp_path: Path) -> None:
    """The same checks, on the local site, run the Spack builds and record their specs."""
    envs = _local_spack_environments()
    names = [n for n in ("spack-openmpi", "spack-intel-oneapi-mpi") if n in envs]
    report = tmp_path / "report.json"
    environ = dict(os.environ, HPCVAL_VAR=str(tmp_path / "var"))
    cmd = [str(Path(sys.executable).parent / "reframe"), "-C",
           str(ROOT / "site-configs" / "local" / "config.py"), "-c",
           str(ROOT / "reframe-checks"), "-n", "cfdio_triad_check",
           *[a for n in names for a in ("-p", n)], "--report-file", str(report), "-r"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=environ, timeout=900,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    cases = json.loads(report.read_text())["runs"][0]["testcases"]
    assert {c["environ"] for c in cases} == set(names)
    for case in cases:
        entry = envs[case["environ"]]["extras"]["spack"]["hpcval-cfdio"]
        assert case["result"] == "pass"
        assert case["software_spec"] == entry["spec"]
        assert case["executable"] == str(Path(entry["prefix"], "bin", "cfdio"))


@needs_spack
def test_stream_check_runs_the_spack_built_stream_on_spack_serial(tmp_path: Path) -> None:
    """STREAM has no MPI: the site offers its Spack build in one `spack-serial`
    environment, and stream_check runs it there and records its spec (or fails
    naming the array size where the build's arrays are too small for this node)."""
    from hpcval.rfm.site import spack_environments

    envs = {e["name"]: e for e in spack_environments("local")}
    if "spack-serial" not in envs:
        pytest.skip("stream not installed in environments/local "
                    "(spack -e environments/local install stream)")
    env = envs["spack-serial"]
    entry = env["extras"]["spack"]["stream"]
    assert "stream" in env["features"] and "mpi" not in env["features"]
    assert entry["spec"].startswith("stream@")
    report = tmp_path / "report.json"
    environ = dict(os.environ, HPCVAL_VAR=str(tmp_path / "var"))
    cmd = [str(Path(sys.executable).parent / "reframe"), "-C",
           str(ROOT / "site-configs" / "local" / "config.py"), "-c",
           str(ROOT / "reframe-checks"), "-n", "^stream_check", "-p", "spack-serial",
           "-S", "samples=5", "--report-file", str(report), "-r"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=environ, timeout=900,
                          check=False)
    cases = json.loads(report.read_text())["runs"][0]["testcases"]
    assert {c["environ"] for c in cases} == {"spack-serial"}, proc.stdout[-3000:]
    for case in cases:
        assert case["software_spec"] == entry["spec"]
        assert case["executable"].startswith(str(Path(entry["prefix"], "bin")))
        if case["result"] != "pass":
            assert "STREAM_ARRAY_SIZE" in (case["fail_reason"] or ""), case["fail_reason"]
