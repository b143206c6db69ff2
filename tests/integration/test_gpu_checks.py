"""The GPU checks through ReFrame on this machine, which has no GPU.

What can run here runs for real: selection by the ``gpu`` feature (the local
site gets no GPU case; a site made from a recorded H200 query gets them all),
the skips and their reasons, the GPU audit failing where ``nvidia-smi`` is
absent, and the BabelStream check's whole path (one run per GPU and sample,
its output files, parsing, the slowest GPU's samples as the figure, a series
per GPU) with ``cuda-stream`` replaced by a script that prints recorded
BabelStream outputs of real A100 runs (tests/data/gpu/babelstream); likewise
the NCCL check on a recorded 16 x H100 ``all_reduce_perf`` run, and the gpubench
pair check on lines constructed in gpubench's own format (it has never run on
a GPU). The replays stand in for the GPU, not for hpcval. Nothing here
measured a GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from hpcval.node.gpus import read_query
from hpcval.site.scaffold import new_site

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
    return _gpu_site(tmp_path, (DATA / "nvidia-smi-csv" / "h200-x4-memory.csv").read_text())


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


def _replay_program(tmp_path: Path, name: str, text: str) -> Path:
    bin_dir = tmp_path / f"replay-{name}"
    bin_dir.mkdir()
    (bin_dir / "output.txt").write_text(text)
    script = bin_dir / name
    script.write_text('#!/bin/sh\ncat "$(dirname "$0")/output.txt"\n')
    script.chmod(0o755)
    return bin_dir


def test_nccl_check_on_a_recorded_h100_run(tmp_path: Path) -> None:
    recorded = (DATA / "nccl-tests" / "all_reduce_perf-h100x16-2nodes.txt").read_text()
    replay = _replay_program(tmp_path, "all_reduce_perf", recorded)
    env = {"HPCVAL_GPU_DIR": str(replay), "HPCVAL_RECORD": "1"}
    # the recorded run spans 16 GPUs: on a 4-GPU partition the count is wrong
    four = tmp_path / "four"
    four.mkdir()
    root4 = _gpu_site(four, (DATA / "nvidia-smi-csv" / "h200-x4-memory.csv").read_text())
    ran = reframe(root4, "gpusite", "-r", "-n", "nccl_allreduce_check", "-S", "samples=2",
                  env=env)
    assert ran.returncode != 0
    assert "all_reduce_perf ran on 16 GPU(s), the node has 4" in ran.stdout
    # a partition declaring 16 GPUs (a query written here, not recorded) takes the figure
    query = "index, name, memory.total [MiB]\n" + "".join(
        f"{i}, NVIDIA H100 80GB HBM3, 81559 MiB\n" for i in range(16))
    sixteen = tmp_path / "sixteen"
    sixteen.mkdir()
    root16 = _gpu_site(sixteen, query)
    ran = reframe(root16, "gpusite", "-r", "-n", "nccl_allreduce_check", "-S", "samples=2",
                  env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (samples_file,) = (root16 / "var").rglob("hpcval-samples.json")
    samples = json.loads(samples_file.read_text())
    assert samples["busbw_1GiB"]["samples"] == [297.86, 297.86]  # out of place, 1 GiB row
    assert samples["busbw_1GiB"]["unit"] == "GB/s"


def _gpu_site(parent: Path, query: str) -> Path:
    root = parent / "hpcval"
    (root / "site-configs").mkdir(parents=True)
    (root / "environments").mkdir()
    for name in ("reframe-checks", "proxies"):
        (root / name).symlink_to(ROOT / name)
    csv = parent / "gpus.csv"
    csv.write_text(query)
    new_site("gpusite", root=root, scheduler="local", gpus=read_query(csv))
    return root


# gpubench has never run on a GPU: its lines here are constructed in the format
# proxies/gpubench/gpubench.cu prints (tests/unit/test_gpubench_parser.py checks
# that format against the source). The script answers each run's arguments.
GPUBENCH = """#!/bin/sh
# gpubench MODE --device D [--peer P] [--reps R] ...: R lines from rates.txt
mode=$1; shift; peer=-1; reps=1
while [ $# -gt 1 ]; do
  case $1 in --device) dev=$2;; --peer) peer=$2;; --reps) reps=$2;; esac; shift 2
done
rate=$(awk -v k="$mode:$dev:$peer" '$1 == k {print $2}' "$(dirname "$0")/rates.txt")
i=1
while [ $i -le "$reps" ]; do
  echo "hpcval-gpubench mode=$mode device=$dev peer=$peer size=268435456 rep=$i" \
       "value=$rate unit=GB/s"
  i=$((i + 1))
done
echo "hpcval-gpubench done mode=$mode"
"""


def test_gpubench_p2p_check_judges_the_slowest_pair(gpu_checkout: Path,
                                                    tmp_path: Path) -> None:
    bin_dir = tmp_path / "gpubench"
    bin_dir.mkdir()
    (bin_dir / "gpubench").write_text(GPUBENCH)
    (bin_dir / "gpubench").chmod(0o755)
    rates = [f"p2p:{s}:{d} {'40.5' if (s, d) == (2, 1) else '310'}"
             for s in range(4) for d in range(4) if s != d]
    (bin_dir / "rates.txt").write_text("\n".join(rates) + "\n")
    ran = reframe(gpu_checkout, "gpusite", "-r", "-n", "gpubench_p2p_check", "-S", "samples=4",
                  env={"HPCVAL_GPU_DIR": str(bin_dir), "HPCVAL_RECORD": "1"})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (samples_file,) = (gpu_checkout / "var").rglob("hpcval-samples.json")
    assert json.loads(samples_file.read_text())["p2p_bw"]["samples"] == [40.5] * 4
    (series,) = [p for p in samples_file.parent.iterdir() if "series" in p.name]
    points = json.dumps(json.loads(series.read_text()))
    assert "GPU pair" in points and "[9.0, 40.5]" in points  # pair 2 -> 1 is 2 * 4 + 1
