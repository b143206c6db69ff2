"""The Spack layer with the real Spack: concretize every environment, audit the
hpcval package repository, and show that one more MPI stack in a matrix yields
the benchmarks built against it. Skipped, with the reason, where Spack is absent.

Concretization is offline: the builtin repository, compilers and mirrors come
from the local Spack configuration (see docs/spack.md). Each environment is
concretized in a temporary copy, so the checkout's environments stay untouched.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hpcval import spack
from hpcval.paths import project_root

needs_spack = pytest.mark.skipif(spack.find_spack() is None, reason=spack.NOT_FOUND)

ROOT = project_root()
ENVIRONMENTS = sorted(p.parent.name for p in (ROOT / "environments").glob("*/spack.yaml"))
CONCRETIZE_TIMEOUT = 1800


def _copy_environments(tmp_path: Path) -> Path:
    """environments/ and spack-repo/ side by side in tmp_path, so the relative
    ``include:`` and ``repos:`` paths of each spack.yaml still resolve."""
    shutil.copytree(ROOT / "environments", tmp_path / "environments",
                    ignore=shutil.ignore_patterns("spack.lock", ".spack-env"))
    (tmp_path / "spack-repo").symlink_to(ROOT / "spack-repo")
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


@needs_spack
@pytest.mark.parametrize("system", ENVIRONMENTS)
def test_environment_concretizes(system: str, tmp_path: Path) -> None:
    env_dir = _copy_environments(tmp_path) / system
    lock = _concretize(env_dir)
    names = {lock["concrete_specs"][r["hash"]]["name"] for r in lock["roots"]}
    assert "intel-mpi-benchmarks" in names
    versions = {lock["concrete_specs"][r["hash"]]["name"]: lock["concrete_specs"][r["hash"]]
                ["version"] for r in lock["roots"]}
    assert versions["intel-mpi-benchmarks"] == "2021.7"  # the common pin holds


@needs_spack
def test_new_mpi_stack_in_matrix_yields_benchmarks_built_against_it(tmp_path: Path) -> None:
    env_dir = _copy_environments(tmp_path) / "local"
    yaml_path = env_dir / "spack.yaml"
    text = yaml_path.read_text()
    old = "- mpis: [openmpi@4.1.4, intel-oneapi-mpi@2021.18.0]"
    assert old in text
    text = text.replace(old, "- mpis: [openmpi@4.1.4, intel-oneapi-mpi@2021.18.0, mpich@4.3.2]")
    text = text.replace("one_of: [openmpi, intel-oneapi-mpi]",
                        "one_of: [openmpi, intel-oneapi-mpi, mpich]")
    yaml_path.write_text(text)
    pairs = _roots_with_dependency(_concretize(env_dir))
    for bench in ("intel-mpi-benchmarks", "osu-micro-benchmarks"):
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


@needs_spack
def test_local_site_offers_spack_built_imb() -> None:
    from hpcval.rfm.site import spack_environments

    env_dir = ROOT / "environments" / "local"
    if spack.install_prefix(env_dir, "intel-mpi-benchmarks ^openmpi") is None:
        pytest.skip("intel-mpi-benchmarks ^openmpi not installed in environments/local "
                    "(spack -e environments/local install intel-mpi-benchmarks ^openmpi)")
    envs = {e["name"]: e for e in spack_environments("local")}
    env = envs["spack-openmpi"]
    assert "imb" in env["features"]
    assert env["extras"]["spec"].startswith("intel-mpi-benchmarks@2021.7")
    assert "^openmpi@4.1.4" in env["extras"]["spec"]
    assert Path(env["extras"]["spack_prefix"], "bin", "IMB-MPI1").is_file()
