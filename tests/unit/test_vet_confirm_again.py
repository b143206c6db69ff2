"""Confirm before naming, twice over.

Per-node figures: a healthy node's step can dip again (batch C1, run 5 of docs/vet.md's
lab table: lab-n10's shared-memory PingPong 68 % low, then 85 % low beside 4
healthy nodes), so a suspect is measured again as many times as the share of
the partition suspected needs (hpcval.vet.confirm.needed), each time alone with
the suspects still off. Network: a node is named on pairs only when the first
judging named it and its fresh peers of the follow-up are low too, a link only
when its pair was measured again (hpcval.vet.netconfirm); the simulated cases
are the ones docs/vet.md traced (a link end named instead of the link, a healthy
link named on one measurement, half-rate links missed among widely spread
pairs)."""

from __future__ import annotations

import numpy as np

from hpcval.vet import confirm, netconfirm
from hpcval.vet.judge import JudgeSettings, Verdict
from hpcval.vet.model import Culprit, Deviation
from hpcval.vet.simvetting import NodeModel, vetting

FIG = "shm_pingpong_bw_1MiB"
NODES = [f"lab-n{i}" for i in range(1, 17)]


def test_measurements_needed_grow_with_the_share_suspected() -> None:
    assert confirm.needed(0, 16) == 0
    assert confirm.needed(1, 16) == 3          # 1 x (2/17)^3 = 0.0016 <= 0.0032
    assert confirm.needed(3, 16) == 4          # 3 x (4/17)^4 = 0.009: capped at 4
    assert confirm.needed(1, 4096) == 1
    assert confirm.needed(700, 4096) == 4      # 700 x (701/4097)^3 = 3.5 > 0.82
    assert confirm.needed(100, 4096) == 2      # 100 x (101/4097)^2 = 0.06 <= 0.82


def _step(low_in: dict[str, set[int]]):
    """A step whose suspects are 70 % low in the measurements listed for them."""
    calls: list[list[str]] = []

    def step(fig: str, hosts: list[str], j: int):
        calls.append(list(hosts))
        return {h: [300.0 if j in low_in.get(h, set()) else 1000.0] * 5 for h in hosts}, {}
    return step, calls


def _verdict(names: list[str]) -> Verdict:
    v = Verdict(nodes=list(NODES))
    v.culprits = [Culprit("node", n, FIG, f"{n}: low", [n]) for n in names]
    return v


def test_a_dip_that_comes_back_once_is_not_named_a_lasting_fault_is() -> None:
    settings = JudgeSettings()
    # lab-n10 dips again in the first measurement again only; lab-n3 stays low
    step, calls = _step({"lab-n10": {0}, "lab-n3": {0, 1, 2, 3}})
    got = confirm.again_loop(NODES, {FIG: ["lab-n3", "lab-n10"]}, step, 4, set(), settings)
    # 2 of 16 suspected: 2 needed; both off again in the first: 4 (a step dips again
    # as often as that share says); lab-n10 not off in the second: out
    assert got[FIG]["needed"] == 4 and len(got[FIG]["again"]) == 3
    assert calls[1][:1] == ["lab-n3"]           # later steps hold only those still off
    verdict = _verdict(["lab-n3", "lab-n10"])
    confirm.judge_again(verdict, got, settings)
    assert verdict.named_nodes == ["lab-n3"]
    assert "measured again (4) beside 4 healthy nodes" in verdict.culprits[0].evidence
    assert any(n.startswith("lab-n10: shared-memory PingPong 1 MiB low in the first "
                            "measurement, not again") for n in verdict.notes)


def test_a_suspect_the_step_budget_left_short_is_not_named_and_says_so() -> None:
    settings = JudgeSettings()
    step, _ = _step({"lab-n3": {0, 1, 2, 3}})
    got = confirm.again_loop(NODES, {FIG: ["lab-n3"]}, step, 1, set(), settings)
    verdict = _verdict(["lab-n3"])
    confirm.judge_again(verdict, got, settings)
    assert verdict.named_nodes == []
    assert any("of the 4 needed" in n and "--confirm" in n for n in verdict.notes)
    # a figure that got no step at all: its suspects are not named either
    got = confirm.again_loop(NODES, {FIG: ["lab-n3"], "triad_bw": ["lab-n5"]}, step, 1,
                             set(), settings)
    verdict = _verdict(["lab-n3"])
    verdict.culprits.append(Culprit("node", "lab-n5", "triad_bw", "low", ["lab-n5"]))
    confirm.judge_again(verdict, got, settings)
    assert verdict.named_nodes == []
    assert any(n.startswith("lab-n5: triad low in the first measurement; the steps allowed "
                            "(--confirm 1) ran out") for n in verdict.notes)


def _dev(worse: float, low: bool = False) -> Deviation:
    return Deviation(100 * (1 - worse), 100.0, worse, worse * 10, low, 5)


def test_links_are_named_on_two_measurements_only() -> None:
    settings = JudgeSettings()   # min_effect 0.15 for pair bandwidth
    first, final = Verdict(nodes=NODES), Verdict(nodes=NODES)
    first.pairs = {"lab-n1|lab-n2": _dev(0.45), "lab-n3|lab-n4": _dev(0.10),
                   "lab-n5|lab-n6": _dev(0.50, True)}
    assert netconfirm.doubtful(first, settings) == [("lab-n1", "lab-n2")]
    final.pairs = {"lab-n1|lab-n2": _dev(0.40), "lab-n3|lab-n4": _dev(0.40, True),
                   "lab-n5|lab-n6": _dev(0.5, True)}
    final.culprits = [Culprit("link", "lab-n3<->lab-n4", "pingpong_bw_1MiB", "x"),
                      Culprit("link", "lab-n5<->lab-n6", "pingpong_bw_1MiB", "y")]
    again = {("lab-n1", "lab-n2"): [50.0, 55.0, 60.0, 52.0, 90.0],
             ("lab-n5", "lab-n6"): [50.0] * 5}
    now = {("lab-n1", "lab-n2"): [62.0, 58.0, 60.0, 64.0, 100.0], ("lab-n5", "lab-n6"): [50.0] * 5}
    netconfirm.judge_links_again(first, final, again, settings, now)
    assert sorted(c.name for c in final.culprits) == ["lab-n1<->lab-n2", "lab-n5<->lab-n6"]
    # the same medians from two dipped samples of five are not a link
    first2, final2 = Verdict(nodes=NODES), Verdict(nodes=NODES)
    first2.pairs = {"lab-n1|lab-n2": _dev(0.45)}
    final2.pairs = {"lab-n1|lab-n2": _dev(0.40)}
    netconfirm.judge_links_again(first2, final2, {("lab-n1", "lab-n2"): [30, 40, 55, 98, 99]},
                                 settings, {("lab-n1", "lab-n2"): [30, 40, 60, 99, 101]})
    assert final2.culprits == []
    assert any(n.startswith("lab-n3<->lab-n4: PingPong 1 MiB low in one measurement only")
               for n in final.notes)


def test_a_node_fine_with_fresh_peers_is_not_named_on_pairs() -> None:
    settings = JudgeSettings()
    first = Verdict(nodes=NODES)
    first.pairs = {"lab-n1|lab-n2": _dev(0.0)}
    first.culprits = [Culprit("node", "lab-n7", "pingpong_bw_1MiB", "low", ["lab-n7"]),
                      Culprit("node", "lab-n3", "pingpong_bw_1MiB", "low", ["lab-n3"])]
    rounds = [[("lab-n3", "lab-n9"), ("lab-n7", "lab-n8")],
              [("lab-n3", "lab-n10"), ("lab-n7", "lab-n11")]]
    samples = {("lab-n3", "lab-n9"): [80.0] * 5, ("lab-n3", "lab-n10"): [78.0] * 5,
               ("lab-n7", "lab-n8"): [99.0] * 5, ("lab-n7", "lab-n11"): [97.0] * 5}
    assert netconfirm.confirmed_nodes(first, rounds, set(), samples, settings) == {"lab-n3"}
    assert any(n.startswith("lab-n7: PingPong 1 MiB low with its planned peers, not with 2 "
                            "fresh peer(s)") for n in first.notes)


def test_half_rate_links_among_widely_spread_pairs_are_named() -> None:
    # pairs sharing an offset of log-sd 0.14: before, slow links 0 of 20 at 256 nodes
    rng = np.random.default_rng(7)
    links = healthy = 0
    for _ in range(6):
        out = vetting(64, rng, slow_nodes=1, slow_links=1, pair_offset=0.14)
        links += len(out.links["confirmed"] & set(out.slow_links))
        healthy += out.healthy_named("confirmed") + out.healthy_links("confirmed")
    assert links >= 5 and healthy == 0


def test_the_lab_s_dip_rate_names_no_healthy_node_with_repeated_measurements() -> None:
    rng = np.random.default_rng(41)
    first = confirmed = 0
    for _ in range(4):
        out = vetting(64, rng, slow_nodes=1, slow_links=1,
                      model=NodeModel(node_dip_rate=3 / 16))
        first += out.healthy_named("first")
        confirmed += out.healthy_named("confirmed")
        assert out.faults_named("confirmed") == 2
    assert first >= 20 and confirmed == 0
