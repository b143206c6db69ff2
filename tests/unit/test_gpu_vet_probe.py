"""``hpcval vet`` on a GPU partition: the GPU probe each node runs
(hpcval.vet.gpu_probe), the per-GPU samples gathered from the nodes' probe lines,
and the partition's ``gpu`` feature turning the GPU phase on.

The probe runs real subprocesses; ``cuda-stream`` is a script printing the
recorded BabelStream outputs of real A100 runs (tests/data/gpu/babelstream), and
``gpubench`` prints lines constructed in its own format (it has never run on a
GPU). The Slurm steps around the probe need the lab and are not run here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcval.node.gpus import read_query
from hpcval.site.scaffold import SlurmPartition, config_text
from hpcval.vet import sitecfg
from hpcval.vet.gpu import judge_gpus
from hpcval.vet.gpu_measure import gpu_samples_of
from hpcval.vet.gpu_probe import MARKER, measure
from hpcval.vet.judge import JudgeSettings, Verdict

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"
FAST, SLOW = "a100-sxm4-80gb-cuda-v5.0.txt", "a100-sxm4-40gb-cuda-v4.0.txt"

STREAM = """#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = --device ] && dev=$2; shift; done
cat "$(dirname "$0")/gpu$dev.txt"
"""

GPUBENCH = """#!/bin/sh
mode=$1; shift; reps=1
while [ $# -gt 1 ]; do case $1 in --device) dev=$2;; --reps) reps=$2;; esac; shift 2; done
i=1
while [ $i -le "$reps" ]; do
  echo "hpcval-gpubench mode=$mode device=$dev peer=-1 size=268435456 rep=$i value=2$dev.5 unit=X"
  i=$((i + 1))
done
echo "hpcval-gpubench done mode=$mode"
"""


def _programs(tmp_path: Path, outputs: list[str], gpubench: bool = True) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    for name, text in (("cuda-stream", STREAM), *((("gpubench", GPUBENCH),) if gpubench
                                                 else ())):
        (d / name).write_text(text)
        (d / name).chmod(0o755)
    for i, name in enumerate(outputs):
        (d / f"gpu{i}.txt").write_text((DATA / "babelstream" / name).read_text())
    return d


def test_probe_measures_every_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCVAL_GPU_DIR", str(_programs(tmp_path, [FAST, SLOW])))
    data = measure(2, 80 << 30, samples=3, array_size=1 << 25)
    assert data["skipped"] == []
    assert data["figures"]["gpu_triad_bw"] == {"0": [1724827.354] * 3, "1": [1377425.601] * 3}
    assert data["figures"]["gpu_h2d_bw"] == {"0": [20.5] * 3, "1": [21.5] * 3}
    assert set(data["figures"]) == {"gpu_triad_bw", "gpu_h2d_bw", "gpu_d2h_bw", "gpu_gemm"}


def test_probe_says_what_it_could_not_measure(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    d = _programs(tmp_path, [FAST, "bi-v100-cuda-v4.0-validation-failed.txt"], gpubench=False)
    monkeypatch.setenv("HPCVAL_GPU_DIR", str(d))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    data = measure(2, 80 << 30, samples=2, array_size=1 << 25)
    assert data["figures"] == {"gpu_triad_bw": {"0": [1724827.354] * 2}}
    assert any("GPU 1" in s and "failed its own validation" in s for s in data["skipped"])
    assert any(s.startswith("gpu_h2d_bw, gpu_d2h_bw, gpu_gemm: gpubench not found")
               for s in data["skipped"])


def test_nodes_probe_lines_become_per_gpu_samples_and_the_slow_gpu_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outputs, failures = {}, []
    for n in range(4):
        node_dir = tmp_path / f"n{n}"
        node_dir.mkdir()
        slow = [SLOW if (n, g) == (2, 3) else FAST for g in range(4)]
        monkeypatch.setenv("HPCVAL_GPU_DIR", str(_programs(node_dir, slow, gpubench=False)))
        data = measure(4, 80 << 30, samples=3, array_size=1 << 25)
        outputs[f"gpu-n{n}"] = "srun noise\n" + MARKER + json.dumps(data) + "\n"
    outputs["gpu-n4"] = "no line\n"
    samples = gpu_samples_of(outputs, failures)
    assert sorted(samples["gpu_triad_bw"]) == ["gpu-n0", "gpu-n1", "gpu-n2", "gpu-n3"]
    assert "gpu-n4: GPU probe printed no result line" in failures
    assert sum("gpubench not found" in f for f in failures) == 4
    verdict = Verdict(nodes=sorted(samples["gpu_triad_bw"]))
    judge_gpus(verdict, samples, {}, JudgeSettings())
    assert [(c.kind, c.name) for c in verdict.culprits] == [("gpu", "gpu-n2/gpu3")]


def test_a_gpu_partition_turns_the_gpu_phase_on(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "hpcval"
    (root / "reframe-checks").mkdir(parents=True)
    site = root / "site-configs" / "cluster"
    site.mkdir(parents=True)
    gpus = read_query(DATA / "nvidia-smi-csv" / "h200-x4-memory.csv")
    parts = [SlurmPartition("cpu", 4, 64), SlurmPartition("gpu", 8, 96)]
    (site / "config.py").write_text(config_text("cluster", "squeue", parts, gpus, ("gpu",)))
    monkeypatch.setenv("HPCVAL_ROOT", str(root))
    assert sitecfg.load("cluster", "gpu", environ="plain").gpus is True
    assert sitecfg.load("cluster", "cpu", environ="plain").gpus is False
