"""environments/templates/gpu-h100: the GPU system's Spack environment template, read as
hpcval reads an environment once it is copied to environments/<system>/ (no Spack needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from hpcval import spack
from hpcval.core.paths import project_root

ROOT = project_root()
TEMPLATE = ROOT / "environments" / "templates" / "gpu-h100"


def test_the_template_is_not_an_environment_of_the_checkout() -> None:
    assert "templates" not in spack.environment_names(ROOT)
    assert "gpu-h100" not in spack.environment_names(ROOT)


def test_copied_to_environments_it_reads_like_the_others(tmp_path: Path) -> None:
    envs = tmp_path / "environments"
    shutil.copytree(ROOT / "environments" / "common", envs / "common")
    shutil.copytree(TEMPLATE, envs / "gpu-h100")
    env_dir = envs / "gpu-h100"
    assert spack.environment_names(tmp_path) == ["gpu-h100"]
    assert spack.declared_target(env_dir) == "sapphirerapids"
    packages, _ = spack.packages_config(env_dir)
    assert packages["gcc"]["buildable"] is False and packages["cuda"]["buildable"] is False
    assert "+cuda cuda_arch=90" in packages["openmpi"]["require"]
    manifest = yaml.safe_load((env_dir / "spack.yaml").read_text())["spack"]
    assert manifest["concretizer"]["targets"]["host_compatible"] is False
    for matrix in manifest["specs"]:
        assert "$arch" in matrix["matrix"][-1]
    gpu = next(d["gpu_benchmarks"] for d in manifest["definitions"] if "gpu_benchmarks" in d)
    assert {s.split()[0].split("@")[0] for s in gpu} == {
        "babelstream", "nccl-tests", "osu-micro-benchmarks", "hpcval-gpubench"}
    assert all("+cuda" in s for s in gpu)
    # hpcval's own proxy by its version (proxies/gpubench/VERSION), not a branch that
    # every commit moves
    assert not any("hpcval-gpubench@" in s for s in gpu)
    # the hpcval repository it names holds the gpubench package
    repo = (env_dir / manifest["repos"]["hpcval"]).resolve()
    assert repo == (tmp_path / "spack-repo" / "spack_repo" / "hpcval").resolve()
    assert (ROOT / "spack-repo" / "spack_repo" / "hpcval" / "packages" / "hpcval_gpubench"
            / "package.py").is_file()
