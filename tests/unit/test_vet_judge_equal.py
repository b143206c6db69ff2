"""The vectorised judging of `hpcval vet` gives the same verdicts as the judging
it replaced (tests/vet_judge_oracle.py, the code before it was vectorised), on
the same samples: every pair matrix recorded on the lab (tests/data/vet/) and
simulated partitions with injected faults in both noise regimes of
docs/vet.md (the campaign's first verdict and its final one, after the
follow-up rounds). Same verdict = the same JSON: every node's and pair's
value, centre, deviation, z, rank-test p and flag, the same culprits with the
same evidence text, the same notes.

One intended change: a per-node figure's rank test against 2,000 other samples
or more is now the exact tail (hpcval.vet.judge.exact_rank_cdf), where the
judging it replaced took the normal approximation; there the p differs, and
the test compares everything else (tests/unit/test_vet_judge_node.py tests
the new p and what it names)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import vet_judge_oracle as oracle

from hpcval.vet import campaign, judge
from hpcval.vet.simulate import SimulatedFabric, cluster, inject

DATA = Path(__file__).resolve().parent.parent / "data" / "vet"
RECORDED = sorted(p.stem for p in DATA.glob("*.json"))


def _verdicts(nodes: list[str], pair_samples: dict, node_samples: dict[str, Any],
              audit: dict, topology: dict[str, str] | None) -> tuple[dict, dict]:
    """(new, old) verdicts as JSON-ready dicts from the same samples."""
    out = []
    for mod in (judge, oracle):
        settings = mod.JudgeSettings()
        verdict = mod.Verdict(nodes=list(nodes))
        mod.judge_pairs(nodes, pair_samples, mod.PAIR_BW, settings, verdict, topology)
        for fig, samples in node_samples.items():
            mod.judge_node_figure(samples, mod.FIGURES[fig], settings, verdict,
                                  judged=fig not in mod.INFORMATIONAL)
        mod.judge_audit(audit, settings, verdict)
        out.append(verdict.to_dict())
    new, old = out
    # what the vectorised judging adds beside the verdicts it replaced (issue codes,
    # uniformity): empty here, since these samples carry no fingerprints or counters
    for key in NEW_KEYS:
        assert not new.pop(key), key
    for culprit in new["culprits"]:  # code, severity, remedy: given after judging (vet.coded)
        for key in ("code", "severity", "remedy"):
            culprit.pop(key)
    return new, old


NEW_KEYS = ("findings", "fingerprint_majority")


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_lab_runs_are_judged_as_before(name: str) -> None:
    data = json.loads((DATA / f"{name}.json").read_text())
    pairs = {tuple(k.split("|")): v for k, v in data["pair_samples"].items()}
    new, old = _verdicts(data["verdict"]["nodes"], pairs, data["node_samples"],
                         data.get("audit", {}), data.get("topology") or None)
    assert new == old
    assert json.dumps(new) == json.dumps(old)  # the same order, too


def _without_large_pool_p(verdict: dict, fig: str) -> dict:
    """The verdict less the rank-test p of per-node figure ``fig`` (judged
    against 2,000 others or more: the exact tail now, the normal approximation
    before)."""
    out = json.loads(json.dumps(verdict))
    for figs in out["table"].values():
        if fig in figs:
            figs[fig]["p"] = "large pool"
    return out


def test_recorded_per_node_figures_of_many_nodes_are_judged_as_before() -> None:
    """Per-node figures of 600 nodes (the recorded lab's triad samples, repeated
    with a factor per node, one node at half): above 2,000 others the rank test
    takes the sorted-pool path and now its exact tail; every value, z, flag,
    culprit and note is the oracle's, the p of the rank test is the exact one."""
    data = json.loads((DATA / "all-healthy.json").read_text())
    rng = np.random.default_rng(3)
    triad = list(data["node_samples"]["triad_bw"].values())
    samples = {f"n{i:03d}": [x * rng.uniform(0.8, 1.2) for x in triad[i % len(triad)]]
               for i in range(600)}
    samples["n007"] = [0.5 * x for x in samples["n007"]]
    new, old = _verdicts(sorted(samples), {}, {"triad_bw": samples}, {}, None)
    assert new != old  # the p of the exact tail
    assert _without_large_pool_p(new, "triad_bw") == _without_large_pool_p(old, "triad_bw")


@pytest.mark.parametrize("noise,dip_rate", [(0.15, 0.05), (0.007, 0.0)], ids=["noisy", "quiet"])
@pytest.mark.parametrize("n,per_switch,seed", [(64, 16, s) for s in range(1, 6)]
                         + [(1024, 32, 1)])
def test_simulated_partitions_are_judged_as_before(n: int, per_switch: int, seed: int,
                                                   noise: float, dip_rate: float) -> None:
    nodes, topo = cluster(n, per_switch)
    rng = np.random.default_rng(seed)
    injected = inject(nodes, topo, rng)
    fabric = SimulatedFabric(nodes, topo, injected.faults, noise=noise, dip_rate=dip_rate,
                             rng=rng)
    camp, _ = campaign.run(nodes, fabric.measure, judge.JudgeSettings(), max_rounds=7,
                           topology=topo)
    first = {**camp.samples, **camp.first}
    first = {p: s for p, s in first.items() if any(p in r for r in camp.rounds)}
    for samples in (first, camp.samples):
        new, old = _verdicts(nodes, samples, {}, {}, topo)
        assert new == old
    assert {c["name"] for c in new["culprits"] if c["kind"] == "node"} >= {
        *injected.slow30, injected.slow90}
