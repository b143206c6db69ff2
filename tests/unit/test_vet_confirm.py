"""Per-node figures named only on independent evidence: a node suspected on its
first measurement is measured again beside healthy controls and named only if
it is off again; a node below the site's bound is named only as an outlier of
its partition. The first measurements are those of a recorded 16-node lab
vetting (tests/data/vet/shm-dips-16nodes.json: three healthy nodes whose five
back-to-back shared-memory PingPongs all fell together)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpcval.vet import confirm, run
from hpcval.vet.judge import FIGURES, JudgeSettings, Verdict, judge_references
from hpcval.vet.model import Deviation

DATA = Path(__file__).resolve().parents[1] / "data" / "vet"
FIG = "shm_pingpong_bw_1MiB"


def recorded() -> dict[str, Any]:
    return json.loads((DATA / "shm-dips-16nodes.json").read_text())


def test_the_first_measurement_suspects_the_nodes_whose_samples_fell_together() -> None:
    result = recorded()
    nodes = result["verdict"]["nodes"]
    assert confirm.suspects(result["node_samples"], nodes, JudgeSettings()) == {
        FIG: ["lab-n9", "lab-n12", "lab-n14"]}
    ctrl = confirm.controls(nodes, {"lab-n9", "lab-n12", "lab-n14"})
    assert len(ctrl) == 4 and not {"lab-n9", "lab-n12", "lab-n14"} & set(ctrl)


def _again(result: dict[str, Any], second: dict[str, list[float]]) -> dict[str, Any]:
    ctrl = ["lab-n1", "lab-n4", "lab-n7", "lab-n11"]
    first = result["node_samples"][FIG]
    return {FIG: {"suspects": ["lab-n9", "lab-n12", "lab-n14"], "controls": ctrl,
                  "samples": {**{n: first[n] for n in ctrl}, **second}, "why": {}}}


def test_a_dip_that_does_not_come_back_is_not_named_one_that_does_is() -> None:
    result = recorded()
    first = result["node_samples"][FIG]
    # second measurement: lab-n9 and lab-n12 like their peers (the samples of two
    # healthy nodes of the same step), lab-n14 as low as before (its own samples)
    result["confirm"] = _again(result, {"lab-n9": first["lab-n10"],
                                        "lab-n12": first["lab-n16"],
                                        "lab-n14": first["lab-n14"]})
    verdict = run.judge_recorded(result)
    assert verdict.named_nodes == ["lab-n3", "lab-n14"]
    [c] = [c for c in verdict.culprits if c.name == "lab-n14"]
    assert "measured again beside 4 healthy nodes: 124 against their median" in c.evidence
    notes = [n for n in verdict.notes if "not named" in n]
    assert len(notes) == 2 and notes[0].startswith("lab-n9: shared-memory PingPong 1 MiB low "
                                                   "in the first measurement, not again")


def test_without_a_second_measurement_the_first_stands_and_says_so() -> None:
    result = recorded()
    result["confirm"] = _again(result, {})
    result["confirm"][FIG]["why"] = {"lab-n9": "srun: error: lab-n9: task 0: Killed"}
    verdict = run.judge_recorded(result)
    assert {"lab-n9", "lab-n12", "lab-n14"} <= set(verdict.named_nodes)
    assert any("lab-n9: shared-memory PingPong 1 MiB not confirmed by a second measurement "
               "(srun: error: lab-n9: task 0: Killed): named on the first" == n
               for n in verdict.notes)


def _table(values: dict[str, float], low: set[str]) -> Verdict:
    verdict = Verdict(nodes=list(values))
    for n, v in values.items():
        verdict.table[n] = {FIG: Deviation(v, 230.0, 0.0, 0.0, n in low, 5)}
    return verdict


def test_below_the_site_s_bound_names_only_an_outlier_of_the_partition() -> None:
    """The partition's median 209-255 MB/s just above the bound 200 MB/s: nodes just
    below it are the partition's spread, one finding; an outlier below it is named."""
    values = {f"n{i}": 230.0 + (i % 5) * 5 for i in range(12)}
    values |= {"n12": 195.0, "n13": 198.0, "n14": 60.0}
    verdict = _table(values, low={"n14"})
    judge_references(verdict, FIGURES, {FIG: (200.0, "references.yaml")}, JudgeSettings())
    assert [c.name for c in verdict.culprits] == ["n14"]
    assert "and an outlier of its partition" in verdict.culprits[0].evidence
    [finding] = verdict.partition
    assert "within 30 % of the site's bound 200 MB/s" in finding
    assert "2 node(s) below it, none an outlier of the partition (n12, n13)" in finding


def test_a_partition_well_above_the_bound_has_no_finding() -> None:
    verdict = _table({f"n{i}": 480.0 + i for i in range(8)}, low=set())
    judge_references(verdict, FIGURES, {FIG: (200.0, "references.yaml")}, JudgeSettings())
    assert verdict.culprits == [] and verdict.partition == []
