"""The GPU checks through ReFrame on this machine, which has no GPU.

What can run here runs for real: selection by the ``gpu`` feature (the local
site gets no GPU case; a site made from a recorded H200 query gets them all),
the skips and their reasons, the GPU audit failing where ``nvidia-smi`` is
absent, and the BabelStream check's whole path (one run per GPU and sample,
its output files, parsing, the slowest GPU's samples as the figure, a series
per GPU) with ``cuda-stream`` replaced by a script that prints recorded
BabelStream outputs of real A100 runs (tests/data/gpu/babelstream): the
replay stands in for the GPU, not for hpcval. Nothing here measured a GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from hpcval.gpus import read_query
from hpcval.scaffold import new_site

from .conftest import BIN, ROOT

pytestmark = pytest.mark.integration

DATA = ROOT / "tests" / "data" / "gpu"
GPU_CHECKS = {"babelstream_triad_check", "gpubench_copy_check", "gpubench_gemm_check",
              "gpubench_p2p_check", "osu_bw_cuda_check", "osu_latency_cuda_check",
              "imb_gpu_pingpong_check", "nccl_allreduce_check", "gpu_health_audit_check"}


def reframe(root: Path, site: str, *args: str,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = dict(os.environ, HPCVAL_ROOT=str(root), **(env or {}))
    environ.pop("HPCVAL_VAR", None)
    return subprocess.run(
        [str(BIN / "reframe"), "-C", str(root / "site-configs" / site / "config.py"),
         "-c", str(root / "reframe-checks" / "gpu"), "-c",
         str(root / "reframe-checks" / "host" / "gpu_health_audit.py"), *args],
        cwd=root, env=environ, text=True, capture_output=True, timeout=300)


def listed(out: str) -> set[str]:
    return {line.split()[1] for line in out.splitlines() if line.startswith("- ")}


@pytest.fixture
def gpu_checkout(tmp_path: Path) -> Path:
    """A checkout whose site ``gpusite`` was made from a recorded 4x H200 query."""
    root = tmp_path / "hpcval"
    (root / "site-configs").mkdir(parents=True)
    (root / "environments").mkdir()
    for name in ("reframe-checks", "proxies"):
        (root / name).symlink_to(ROOT / name)
    new_site("gpusite", root=root, scheduler="local",
             gpus=read_query(DATA / "nvidia-smi-csv" / "h200-x4-memory.csv"))
    return root


def test_the_local_site_gets_no_gpu_case() -> None:
    done = reframe(ROOT, "local", "-l")
    assert done.returncode == 0, done.stdout + done.stderr
    assert listed(done.stdout) == set() and "Found 0 check(s)" in done.stdout


def test_a_gpu_partition_gets_every_gpu_check_and_they_skip_with_reasons(
        gpu_checkout: Path) -> None:
    done = reframe(gpu_checkout, "gpusite", "-l")
    assert listed(done.stdout) == GPU_CHECKS, done.stdout + done.stderr
    # no CUDA program is installed here: each skips naming what to install
    ran = reframe(gpu_checkout, "gpusite", "-r", "-x", "imb_gpu_pingpong_check",
                  "-x", "gpu_health_audit_check", env={"PATH": f"{BIN}:/usr/bin:/bin"})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "0 failure(s)" in ran.stdout and "Ran 0/" in ran.stdout
    assert "cuda-stream not found in $HPCVAL_GPU_DIR (unset) or PATH" in ran.stdout
    assert "spack install hpcval-gpubench" in ran.stdout
    assert "all_reduce_perf not found" in ran.stdout


def test_the_gpu_audit_fails_where_nvidia_smi_is_absent(gpu_checkout: Path) -> None:
    ran = reframe(gpu_checkout, "gpusite", "-r", "-n", "gpu_health_audit_check",
                  env={"PATH": f"{BIN}:/usr/bin:/bin", "HPCVAL_RECORD": "1"})
    assert ran.returncode != 0
    assert "nvidia-smi not found on PATH" in ran.stdout + ran.stderr


REPLAY = """#!/bin/sh
# Prints the recorded BabelStream output of the GPU given by --device (gpu<D>.txt)
while [ $# -gt 0 ]; do [ "$1" = --device ] && dev=$2; shift; done
cat "$(dirname "$0")/gpu$dev.txt"
"""


def _replay_dir(tmp_path: Path, outputs: list[str]) -> Path:
    bin_dir = tmp_path / "replay"
    bin_dir.mkdir()
    script = bin_dir / "cuda-stream"
    script.write_text(REPLAY)
    script.chmod(0o755)
    for device, name in enumerate(outputs):
        (bin_dir / f"gpu{device}.txt").write_text((DATA / "babelstream" / name).read_text())
    return bin_dir


def test_babelstream_check_judges_the_slowest_gpu_of_recorded_runs(
        gpu_checkout: Path, tmp_path: Path) -> None:
    fast, slow = "a100-sxm4-80gb-cuda-v5.0.txt", "a100-sxm4-40gb-cuda-v4.0.txt"
    replay = _replay_dir(tmp_path, [fast, fast, slow, fast])
    # the recorded runs used 2^25-element arrays (268.4 MB): size the check to match
    ran = reframe(gpu_checkout, "gpusite", "-r", "-n", "babelstream_triad_check",
                  "-S", "array_size=33554432", "-S", "samples=3",
                  env={"HPCVAL_GPU_DIR": str(replay), "HPCVAL_RECORD": "1"})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (samples_file,) = (gpu_checkout / "var").rglob("hpcval-samples.json")
    samples = json.loads(samples_file.read_text())
    text = json.dumps(samples)
    assert "1377425.601" in text and "1724827.354" not in text  # GPU 2's, three times
    (series,) = [p for p in samples_file.parent.iterdir() if "series" in p.name]
    series_text = series.read_text()
    assert "GPU index" in series_text and "1724827.354" in series_text


def test_babelstream_check_fails_on_a_gpu_whose_results_failed_validation(
        gpu_checkout: Path, tmp_path: Path) -> None:
    fast = "a100-sxm4-80gb-cuda-v5.0.txt"
    replay = _replay_dir(tmp_path, [fast, "bi-v100-cuda-v4.0-validation-failed.txt", fast,
                                    fast])
    ran = reframe(gpu_checkout, "gpusite", "-r", "-n", "babelstream_triad_check",
                  "-S", "array_size=33554432", "-S", "samples=1",
                  env={"HPCVAL_GPU_DIR": str(replay), "HPCVAL_RECORD": "1"})
    assert ran.returncode != 0
    assert "failed its own validation" in ran.stdout


def test_babelstream_check_refuses_arrays_of_another_size(gpu_checkout: Path,
                                                          tmp_path: Path) -> None:
    fast = "a100-sxm4-80gb-cuda-v5.0.txt"
    replay = _replay_dir(tmp_path, [fast] * 4)
    # sized from the partition (1 GiB arrays), the replayed 268.4 MB arrays are wrong
    ran = reframe(gpu_checkout, "gpusite", "-r", "-n", "babelstream_triad_check",
                  "-S", "samples=1", env={"HPCVAL_GPU_DIR": str(replay), "HPCVAL_RECORD": "1"})
    assert ran.returncode != 0
    assert "BabelStream ran arrays of 268.4 MB, 1073.7 MB asked for" in ran.stdout
