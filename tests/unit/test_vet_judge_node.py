"""Per-node figures (triad, shared-memory PingPong, CPU frequency) at any
partition size: the rank test of a node's few samples against a large pool is
the exact tail (hpcval.vet.judge.exact_rank_cdf), so a node clearly off is named
at 512 and 4,096 nodes too, where the normal approximation could not go below
p = 5.4e-5 while the Bonferroni correction asks for 1 % / N; healthy nodes of
the same simulated partitions are not named."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from hpcval.vet.judge import (
    FIGURES,
    JudgeSettings,
    Verdict,
    exact_rank_cdf,
    judge_node_figure,
)
from hpcval.vet.simulate import simulated_result


@pytest.mark.parametrize("n1,n2", [(1, 9), (3, 40), (5, 30), (5, 400), (5, 1999)])
def test_exact_tail_is_scipys_exact_test(n1: int, n2: int) -> None:
    rng = np.random.default_rng(n1 * 1000 + n2)
    for shift in (0.0, 0.5, 1.5, 4.0):
        x, y = rng.normal(size=n1) - shift, rng.normal(size=n2)
        u = int((x[:, None] > y[None, :]).sum())
        ref = float(mannwhitneyu(x, y, alternative="less", method="exact").pvalue)
        assert exact_rank_cdf(n1, n2, u) == pytest.approx(ref, rel=1e-9, abs=1e-15)


def test_exact_tail_bounds() -> None:
    assert exact_rank_cdf(5, 20_475, 0) == pytest.approx(1 / math.comb(20_480, 5), rel=1e-12)
    assert exact_rank_cdf(5, 20_475, -1) == 0.0
    assert exact_rank_cdf(5, 20_475, 5 * 20_475) == 1.0
    # symmetric around n1 n2 / 2: P(U <= k) + P(U <= n1 n2 - k - 1) = 1
    assert exact_rank_cdf(5, 100, 200) + exact_rank_cdf(5, 100, 299) == pytest.approx(1.0)


def _triad(n: int, seed: int, factor: float) -> dict[str, list[float]]:
    """Triad samples as hpcval.vet.simulate draws them (5 per node, log-normal
    noise of 5 %); node 7 at ``factor`` of the others."""
    rng = np.random.default_rng(seed)
    draws = 20_000.0 * np.exp(rng.normal(0.0, 0.05, (n, 5)))
    draws[7] *= factor
    return {f"n{i:05d}": [float(v) for v in row] for i, row in enumerate(draws)}


@pytest.mark.parametrize("n", [64, 256, 512, 4096])
def test_a_node_at_half_triad_is_named_at_any_size(n: int) -> None:
    samples = _triad(n, seed=n, factor=0.5)
    verdict = Verdict(nodes=sorted(samples))
    judge_node_figure(samples, FIGURES["triad_bw"], JudgeSettings(), verdict)
    assert verdict.named_nodes == ["n00007"]
    d = verdict.table["n00007"]["triad_bw"]
    assert d.p is not None and d.p * n < JudgeSettings().alpha


@pytest.mark.parametrize("n", [512, 4096])
def test_simulated_partitions_name_no_healthy_node_for_a_per_node_figure(n: int) -> None:
    """The whole simulated vetting (hpcval.vet.simulate, as bench/vet_simulate.py
    and the report take it): its per-node figures are all healthy."""
    result = simulated_result(n, seed=2)
    per_node = [c for c in result["verdict"]["culprits"]
                if c["figure"] in ("triad_bw", "shm_pingpong_bw_1MiB", "cpu_mhz")]
    assert per_node == []


def test_a_node_at_half_among_4096_is_named_for_every_per_node_figure() -> None:
    rng = np.random.default_rng(11)
    settings = JudgeSettings()
    verdict = Verdict(nodes=[f"n{i:05d}" for i in range(4096)])
    for fig, typical in (("triad_bw", 20_000.0), ("shm_pingpong_bw_1MiB", 9_000.0),
                         ("cpu_mhz", 2_600.0)):
        draws = typical * np.exp(rng.normal(0.0, 0.05, (4096, 5)))
        draws[100] *= 0.5
        judge_node_figure({n: [float(v) for v in row] for n, row in zip(
            verdict.nodes, draws, strict=True)}, FIGURES[fig], settings, verdict)
    assert [(c.name, c.figure) for c in verdict.culprits] == [
        ("n00100", "triad_bw"), ("n00100", "shm_pingpong_bw_1MiB"), ("n00100", "cpu_mhz")]
