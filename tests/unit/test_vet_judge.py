"""The outlier judging of `hpcval vet` on pair matrices recorded on the lab
(tests/data/vet/: each file says what was shaped and the machine's load)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hpcval.vet import campaign
from hpcval.vet.judge import JudgeSettings, Verdict, judge_audit, judge_references
from hpcval.vet.run import judge_recorded
from hpcval.vet.simulate import Faults, SimulatedFabric, cluster

DATA = Path(__file__).resolve().parent.parent / "data" / "vet"


def recorded(name: str) -> dict[str, Any]:
    return json.loads((DATA / f"{name}.json").read_text())


def test_one_bad_node_is_named_with_its_pairs_as_evidence() -> None:
    verdict = judge_recorded(recorded("one-bad-node"))
    assert verdict.named_nodes == ["lab-n3"]
    [culprit] = verdict.culprits
    assert culprit.kind == "node" and culprit.figure == "pingpong_bw_1MiB"
    assert "low in 5 of 5 pairs" in culprit.evidence
    # a healthy peer of lab-n3 has one low pair, and is not blamed for it
    assert verdict.table["lab-n1"]["pingpong_bw_1MiB"].low is False


def test_one_bad_link_is_named_as_the_link_not_a_node() -> None:
    verdict = judge_recorded(recorded("one-bad-link"))
    assert verdict.named_nodes == []
    assert [(c.kind, c.name) for c in verdict.culprits] == [("link", "lab-n2<->lab-n5")]


def test_all_healthy_names_nobody_though_the_triad_scatters() -> None:
    data = recorded("all-healthy")
    triad = data["node_samples"]["triad_bw"]
    best = [max(s) for s in triad.values()]
    assert min(best) < 0.5 * max(best)  # the load made two nodes' best triad 71 % low
    verdict = judge_recorded(data)
    assert verdict.culprits == [] and verdict.judged


def test_too_few_nodes_to_judge_names_nobody_and_says_why() -> None:
    verdict = judge_recorded(recorded("too-few-nodes"))
    assert not verdict.judged and verdict.culprits == []
    assert any("fewer than 4" in n and "PingPong 1 MiB" in n for n in verdict.notes)


def test_a_node_30_percent_slow_is_named() -> None:
    verdict = judge_recorded(recorded("slow-30pct"))
    assert verdict.named_nodes == ["lab-n3"]


def test_a_healthy_matrix_made_30_percent_slow_for_one_node_names_it() -> None:
    data = recorded("all-healthy")
    for key, samples in data["pair_samples"].items():
        if "lab-n5" in key.split("|"):
            data["pair_samples"][key] = [0.7 * x for x in samples]
    assert judge_recorded(data).named_nodes == ["lab-n5"]
    # and 10 % slow is below the practical minimum (15 %): nobody
    data = recorded("all-healthy")
    for key, samples in data["pair_samples"].items():
        if "lab-n5" in key.split("|"):
            data["pair_samples"][key] = [0.9 * x for x in samples]
    assert judge_recorded(data).named_nodes == []


def test_tuning_audit_names_a_mismatch_and_a_node_unlike_the_others() -> None:
    audit = recorded("all-healthy")["audit"]
    assert audit and all(audit.values())
    changed = copy.deepcopy(audit)
    for f in changed["lab-n2"]:
        if f["setting"] == "transparent_hugepage":
            f["found"] = "never-seen"
    for f in changed["lab-n4"]:
        if f["setting"] == "rlimit_nofile":
            f["found"], f["status"] = "256", "mismatch"
    verdict = Verdict(nodes=sorted(changed))
    judge_audit(changed, JudgeSettings(), verdict)
    named = {(c.name, c.evidence.split(":")[1].strip().split()[0]) for c in verdict.culprits}
    assert ("lab-n4", "tuning") in named  # misses the site's expectation
    assert ("lab-n2", "transparent_hugepage") in named  # differs from 5 of 6
    assert {c.name for c in verdict.culprits} == {"lab-n2", "lab-n4"}


def test_references_partition_wide_miss_is_said_once_and_names_nobody() -> None:
    verdict = judge_recorded(recorded("all-healthy"))
    judge_references(verdict, __import__("hpcval.vet.judge", fromlist=["FIGURES"]).FIGURES,
                     {"pingpong_bw_1MiB": (170.4, "references.yaml")})
    assert verdict.culprits == []
    assert len(verdict.partition) == 1 and "whole partition" in verdict.partition[0]


@pytest.mark.parametrize("seed", [1, 2])
def test_a_slow_switch_is_named_as_the_switch(seed: int) -> None:
    nodes, topo = cluster(64, 16)
    fabric = SimulatedFabric(nodes, topo, Faults(slow_switches={"sw002": 0.5}),
                             rng=np.random.default_rng(seed))
    _, verdict = campaign.run(nodes, fabric.measure, JudgeSettings(), max_rounds=7,
                              topology=topo)
    kinds = {(c.kind, c.name) for c in verdict.culprits}
    assert kinds == {("switch", "sw002")}


def test_html_page_names_the_culprit_once_with_its_evidence() -> None:
    from hpcval.vet import report

    result = recorded("one-bad-node")
    result["verdict"] = judge_recorded(result).to_dict()
    # what `hpcval vet` stores beside the samples (the recorded file keeps the samples only)
    result.update(id="20261123T205156Z-ebfeeb", site="lab", partition="lab", rounds=5,
                  follow_up_rounds=0, jobs=1, steps=81, wall_seconds=67.0)
    page = report.html_page(result)
    assert "<b>node lab-n3</b>: PingPong 1 MiB" in page
    assert "lab-n3: lab-n3" not in page


def test_vet_figures_use_the_figure_vocabulary() -> None:
    """A vetted figure's direction is checked like a check's: one of higher
    or lower, and never against its unit's kind."""
    from hpcval.vet.judge import FigureSpec

    with pytest.raises(ValueError, match="better must be one of"):
        FigureSpec("x_bw", "x", "MB/s", "faster", 0.1)
    with pytest.raises(ValueError, match="MB/s is better lower"):
        FigureSpec("x_bw", "x", "MB/s", "lower", 0.1)
    assert FigureSpec("x_lat", "x", "us", "lower", 0.1).worse(1.2, 1.0) == pytest.approx(0.2)
