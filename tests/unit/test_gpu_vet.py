"""`hpcval vet` on a GPU partition: a simulated partition built from recorded
per-GPU figures (BabelStream triad of an A100-SXM4-40GB, recorded twice on one
Polaris node: tests/data/gpu/babelstream), one GPU made slow.

Model (an assumption, to check on a real partition): every GPU's true triad is
the recorded level times a per-GPU factor, and each run scatters around it;
both spreads are the relative difference of the two recorded runs (0.8 %). A
slow GPU (clocks locked low, a throttling GPU, a co-running load) is the same
draw times its slowdown."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hpcval.parsers.babelstream import parse_babelstream
from hpcval.vet.gpu import GPU_FIGURES, judge_gpu_figure
from hpcval.vet.judge import JudgeSettings, Verdict
from hpcval.vet.run import judge_recorded

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu" / "babelstream"
RUNS = [parse_babelstream((DATA / name).read_text()).rate("triad")
        for name in ("a100-sxm4-40gb-cuda-v4.0.txt", "a100-sxm4-40gb-cuda-v4.0-nsys.txt")]
LEVEL = float(np.mean(RUNS))
SPREAD = abs(RUNS[0] - RUNS[1]) / LEVEL


def partition(seed: int, slow: dict[tuple[str, int], float], nodes: int = 4, gpus: int = 4,
              samples: int = 5) -> dict[str, dict[int, list[float]]]:
    rng = np.random.default_rng(seed)
    out: dict[str, dict[int, list[float]]] = {}
    for n in range(1, nodes + 1):
        node = f"gpu-n{n}"
        out[node] = {}
        for g in range(gpus):
            true = LEVEL * np.exp(rng.normal(0, SPREAD)) * slow.get((node, g), 1.0)
            out[node][g] = [float(x) for x in true * np.exp(rng.normal(0, SPREAD, samples))]
    return out


def judge(samples: dict[str, dict[int, list[float]]]) -> Verdict:
    verdict = Verdict(nodes=sorted(samples))
    judge_gpu_figure(samples, GPU_FIGURES["gpu_triad_bw"], JudgeSettings(), verdict)
    return verdict


def test_the_recorded_spread_is_small() -> None:
    assert 0.001 < SPREAD < 0.02


def test_one_gpu_15_percent_slow_is_named_by_node_and_index() -> None:
    verdict = judge(partition(1, {("gpu-n3", 2): 0.85}))
    assert [(c.kind, c.name) for c in verdict.culprits] == [("gpu", "gpu-n3/gpu2")]
    [c] = verdict.culprits
    assert c.nodes == ["gpu-n3"] and c.evidence.startswith("gpu-n3 GPU 2: GPU memory triad")
    assert "of the partition's 16 GPUs" in c.evidence
    assert verdict.table["gpu-n3"]["gpu_triad_bw[gpu2]"].low
    assert not verdict.table["gpu-n3"]["gpu_triad_bw[gpu1]"].low


@pytest.mark.parametrize("seed", range(20))
def test_a_healthy_partition_names_no_gpu(seed: int) -> None:
    assert judge(partition(100 + seed, {})).culprits == []


def test_a_node_whose_four_gpus_are_slow_names_all_four() -> None:
    slow = {("gpu-n2", g): 0.8 for g in range(4)}
    verdict = judge(partition(7, slow))
    assert sorted(c.name for c in verdict.culprits) == [f"gpu-n2/gpu{g}" for g in range(4)]
    assert verdict.named_nodes == ["gpu-n2"]


def test_a_5_percent_loss_is_below_the_practical_threshold() -> None:
    assert judge(partition(3, {("gpu-n1", 0): 0.95})).culprits == []


def test_too_few_gpus_are_shown_not_judged() -> None:
    verdict = judge(partition(4, {("gpu-n1", 0): 0.5}, nodes=1, gpus=2))
    assert verdict.culprits == [] and "fewer than 4" in verdict.notes[0]


def test_a_stored_vetting_with_gpu_samples_is_judged_again() -> None:
    samples = partition(1, {("gpu-n3", 2): 0.85})
    stored = {"verdict": {"nodes": sorted(samples)}, "pair_samples": {}, "node_samples": {},
              "gpu_samples": {"gpu_triad_bw": {n: {str(g): s for g, s in per.items()}
                                               for n, per in samples.items()}}}
    verdict = judge_recorded(stored)
    assert [c.name for c in verdict.culprits if c.kind == "gpu"] == ["gpu-n3/gpu2"]
