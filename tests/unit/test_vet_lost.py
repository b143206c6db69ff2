"""A vetting that meets what the recorded runs with two faults never met: a
follow-up round of one pair (a 2-rank ``IMB-MPI1 -multi 1`` world prints a plain
``PingPong`` table), a node lost in the middle of the vetting (named with srun's
first line about it, left out of the rounds after, its peers re-paired), a step
Slurm never created, and a plan refused before anything is stored. Outputs are
recorded (tests/data/vet/steps/README.md); nothing here needs Slurm."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from hpcval.core.errors import InputError, ParseError
from hpcval.vet import campaign, measure, planning, report, run, sitecfg
from hpcval.vet import slurm as vslurm
from hpcval.vet.judge import JudgeSettings
from hpcval.vet.schedule import Pair, follow_up, pair
from hpcval.vet.slurm import StepResult

DATA = Path(__file__).resolve().parents[1] / "data"
STEPS = DATA / "vet" / "steps"


def test_a_two_rank_multi_world_is_read_from_its_plain_pingpong_table() -> None:
    """IMB-MPI1 -multi 1 over 2 ranks prints "Benchmarking PingPong" with the Group
    column, not "Multi-PingPong" (recorded with Intel MPI's IMB-MPI1, 2 ranks)."""
    text = (STEPS / "pair-2ranks-multi1.out").read_text()
    assert "Multi-PingPong" not in text and "Group" in text
    got, lost = measure.multi_pingpong(text, [("vm", "vm")], "round 8")
    assert lost == {} and list(got) == [0]
    bw, lat = got[0]
    assert len(bw) == 5 and len(lat) == 5 and min(bw) > 1000


def test_a_follow_up_round_of_one_pair_on_the_lab_is_measured_and_judged() -> None:
    """The 16-node lab, lab-n3's link at 80 %: the follow-up pairs lab-n3 with two
    fresh peers, one pair per round (both hold lab-n3). Round 8 as srun printed it
    is read as one group, and the pair's samples join the judging."""
    text = (STEPS / "round8-1pair-16nodes.out").read_text()
    got, lost = measure.multi_pingpong(text, [("lab-n2", "lab-n3")], "round 8")
    assert lost == {} and [round(x, 2) for x in got[0][0]] == [5.04, 5.04, 5.05, 5.04, 5.03]
    rng = random.Random(8)
    nodes = [f"lab-n{i}" for i in range(1, 17)]

    def meas(i: int, pairs: list[Pair]) -> dict[Pair, list[float]]:
        if len(pairs) == 1 and pairs[0] == ("lab-n2", "lab-n3"):
            return {pairs[0]: got[0][0]}  # the recorded round
        return {p: [rng.gauss(5.0 if "lab-n3" in p else 6.24, 0.05) for _ in range(5)]
                for p in pairs}

    camp, verdict = campaign.run(nodes, meas, JudgeSettings(), max_rounds=7)
    assert [len(r) for r in camp.follow_up_rounds] == [1, 1]
    assert ("lab-n2", "lab-n3") in camp.samples and not camp.failed
    assert verdict.named_nodes == ["lab-n3"]


def test_a_pingpong_table_without_groups_is_refused_with_what_ran() -> None:
    text = (DATA / "imb" / "pingpong_warm_impi2021.19.txt").read_text()
    with pytest.raises(ParseError, match="without a Group column .* without -multi 1"):
        measure.multi_pingpong(text, [("a", "b")], "round 8")


# srun's words, as Slurm 22.05 prints them (the lab: tests/lab/test_vet_lost_lab.py)
LAUNCH_FAILED = ("srun: error: Task launch for StepId=12.6 failed on node lab-n9: "
                 "Communication connection failure")
STDERR_NODE_LOST = "\n".join([
    "[0] MPI startup(): Intel(R) MPI Library, Version 2021.18.1",
    LAUNCH_FAILED,
    "srun: error: Application launch failed: Communication connection failure",
    "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
    "slurmstepd: error: *** STEP 12.6 ON lab-n1 CANCELLED AT 2026-11-28T12:40:01 ***",
    "srun: error: lab-n8: task 9: Killed",
]) + "\n"


def test_the_node_named_is_srun_s_first_about_a_failed_node_not_its_last() -> None:
    nodes = [f"lab-n{i}" for i in range(1, 17)]
    assert vslurm.first_node_error(STDERR_NODE_LOST, nodes) == ("lab-n9", LAUNCH_FAILED)
    ranks_killed = ("srun: error: lab-n4: task 3: Killed\n"
                    "srun: error: lab-n2: tasks 0-2,4-7: Killed\n")
    assert vslurm.first_node_error(ranks_killed, nodes)[0] == "lab-n4"  # type: ignore[index]
    # the node that reports a cancelled step is not the node that failed
    assert vslurm.first_node_error(STDERR_NODE_LOST.splitlines()[4], nodes) is None


def test_the_lab_s_lost_node_is_srun_s_first_line_on_recorded_output(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 4 of a 16-node lab vetting after lab-n9's slurmd was killed: srun's
    last line names lab-n11 (a task of the world it took down), its first lab-n9."""
    stderr = (STEPS / "round4-node-lost-16nodes.err").read_text()
    hosts = [f"lab-n{i}" for i in (15, 2, 7, 9, 12, 16, 10, 11, 6, 8, 14, 3, 4, 5, 1, 13)]
    assert "lab-n11: task 7: Killed" in stderr.strip().splitlines()[-1]
    monkeypatch.setattr(measure, "nodes_info", lambda names: {
        "lab-n9": vslurm.NodeInfo("lab-n9", "DOWN*", "Not responding", ["lab"])})
    res = StepResult("round4", 1, "", stderr, 11.2)
    assert measure.lost_in_step(res, hosts) == {
        "lab-n9": "srun: error: Task launch for StepId=3.6 failed on node lab-n9: "
                  "Communication connection failure"}
    assert not measure._why(res).startswith("srun: error: Task launch")  # the old cause


def test_a_step_slurm_never_created_is_not_counted(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vslurm, "_require", lambda prog: prog)
    answers = [StepResult("r1", 0, "", "", 3.0),
               StepResult("r2", 1, "", "srun: error: Unable to confirm allocation for job "
                          "12: Invalid job id specified\n", 0.1)]
    monkeypatch.setattr(vslurm, "run_step", lambda *a, **k: answers.pop(0))
    alloc = vslurm.Allocation(["a", "b"], "lab", 10)
    alloc.job_id = "12"
    alloc.run("round1", ["a", "b"], ["IMB-MPI1"], {}, 10, tmp_path)
    res = alloc.run("round2", ["a", "b"], ["IMB-MPI1"], {}, 10, tmp_path)
    assert alloc.steps == 1 and alloc.step_seconds == [("round1", 3.0)]
    assert alloc.refused == [("round2", "srun: error: Unable to confirm allocation for job "
                                        "12: Invalid job id specified")]
    assert measure._why(res).startswith("Slurm created no step: ")


def test_every_step_runs_with_the_node_s_limits_and_the_job_survives_a_node(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vslurm, "_require", lambda prog: prog)
    alloc = vslurm.Allocation(["a", "b"], "lab", 10)
    alloc.job_id = "12"
    for independent in (True, False):
        cmd, _ = alloc.step(["a", "b"], ["x"], tmp_path / "hf", independent=independent)
        assert "--propagate=NONE" in cmd and "--overlap" in cmd and "--exclusive" not in cmd
    seen: list[list[str]] = []
    monkeypatch.setattr(vslurm, "_run", lambda cmd, timeout=30: seen.append(list(cmd)) or
                        type("P", (), {"returncode": 0, "stdout": "",
                                       "stderr": "salloc: Granted job allocation 7"})())
    with alloc:
        pass
    assert "--no-kill" in seen[0]


NODES = [f"n{i:02d}" for i in range(1, 13)]


def _healthy(p: Pair, rng: random.Random) -> list[float]:
    return [rng.gauss(100.0, 2.0) for _ in range(5)]


def test_a_node_lost_in_a_round_is_left_out_after_and_its_peers_re_paired() -> None:
    """n05 dies in round 3: round 3 is measured again without it, the rounds after
    leave it out, every peer it left without a pair meets a healthy peer in the
    follow-up; no pair without n05 is lost and nobody is named."""
    rng = random.Random(41)
    lost: dict[str, str] = {}
    calls: list[tuple[int, list[Pair]]] = []

    def meas(i: int, pairs: list[Pair]) -> dict[Pair, list[float]]:
        calls.append((i, list(pairs)))
        if i == 2 and "n05" not in lost:  # the world of round 3 ends with n05
            lost["n05"] = f"round 3: {LAUNCH_FAILED.replace('lab-n9', 'n05')}"
            return {}
        assert not any("n05" in p for p in pairs) or i < 2
        return {p: _healthy(p, rng) for p in pairs}

    camp, verdict = campaign.run(NODES, meas, JudgeSettings(), max_rounds=7, lost=lost)
    assert [c[0] for c in calls[:4]] == [0, 1, 2, 2]  # round 3, then round 3 again
    assert camp.again_rounds == [[p for p in camp.rounds[2] if "n05" not in p]]
    assert all("n05" not in p for i, ps in calls[4:] for p in ps)
    missing = [p for r in camp.rounds for p in r if p not in camp.samples]
    assert missing and all("n05" in p for p in missing)
    orphans = {n for p in missing for n in p if n != "n05"}
    repaired = {n for r in camp.follow_up_rounds for p in r for n in p if n in orphans}
    assert repaired == orphans
    assert camp.lost == {"n05": lost["n05"]} and verdict.named_nodes == []
    assert camp.steps == 7 + 1 + len(camp.follow_up_rounds)


def test_orphans_are_re_paired_after_the_suspects() -> None:
    rounds = follow_up([pair("a", "b")], [], ["c", "d", "e", "f"], set(), max_rounds=2,
                       orphans=["g"])
    flat = [p for r in rounds for p in r]
    assert flat[0] == pair("a", "b") and sum("g" in p for p in flat) == 1


def test_a_lost_node_is_unmeasured_with_srun_s_first_line_never_ok() -> None:
    samples = measure.NodeSamples()
    camp = campaign.Campaign(rounds=[[("n01", "n05"), ("n02", "n03")],
                                     [("n01", "n02"), ("n03", "n05")]],
                             samples={("n02", "n03"): [1.0], ("n01", "n02"): [1.0]},
                             failed=[("n01", "n05"), ("n03", "n05")],
                             lost={"n05": f"round 1: {LAUNCH_FAILED}"})
    out = run.unmeasured(["n01", "n02", "n03", "n05"], samples, camp,
                         {("n01", "n05"): f"round 1: {LAUNCH_FAILED}"})
    assert out[0] == {"kind": "node", "name": "n05",
                      "cause": f"lost during the vetting: round 1: {LAUNCH_FAILED}"}
    assert out[2]["name"] == "n03<->n05" and out[2]["cause"].startswith(
        "not measured: n05 was lost (round 1: srun: error: Task launch")
    result = {"verdict": {"nodes": ["n01", "n02", "n03", "n05"], "culprits": []},
              "unmeasured": out}
    assert report.node_verdicts(result)["n05"] == "UNMEASURED"


def test_the_page_lists_each_unmeasured_once_as_text() -> None:
    result = json.loads((DATA / "vet" / "one-bad-node.json").read_text())
    result["verdict"] = run.judge_recorded(result).to_dict()
    result.update(id="20261123T205156Z-ebfeeb", site="lab", partition="lab", rounds=5,
                  follow_up_rounds=0, jobs=1, steps=8, wall_seconds=67.0)
    result["unmeasured"] = [{"kind": "pair", "name": "lab-n2<->lab-n7",
                             "cause": "round 3: srun: error: lab-n7: task 3: Killed"}]
    result["failures"] = []
    page = report.html_page(result)
    assert "{&#x27;kind&#x27;" not in page and "{'kind'" not in page
    assert page.count("lab-n2&lt;-&gt;lab-n7") == 1
    assert "Not measured: pair lab-n2&lt;-&gt;lab-n7: round 3: srun: error: lab-n7" in page


@pytest.fixture(scope="module")
def lab_site() -> sitecfg.VetSite:
    return sitecfg.load("lab", None, "impi")


def _stored(var: Path, vet_id: str, nodes: int, steps: dict[str, float],
            partition: str = "lab") -> None:
    d = var / "vet" / vet_id
    d.mkdir(parents=True)
    (d / "vet.json").write_text(json.dumps({
        "partition": partition, "step_seconds": steps,
        "verdict": {"nodes": [f"n{i}" for i in range(nodes)]}}))


def test_the_plan_s_wall_time_comes_from_the_partition_s_stored_vettings(
        lab_site: sitecfg.VetSite, tmp_path: Path) -> None:
    site = dataclasses.replace(lab_site, var=tmp_path)
    names = [f"n{i}" for i in range(16)]
    first = planning.make_plan(site, names, planning.Options())
    assert "no stored vetting" in first.text()
    steps = {"probe": 5.0, "triad": 20.0, "shm-pingpong": 25.0,
             **{f"round{i}": 30.0 for i in range(1, 8)}, "round8-again1": 32.0}
    _stored(tmp_path, "20261128T120000Z-aaaaaa", 16, steps)
    _stored(tmp_path, "20261128T120500Z-bbbbbb", 16, steps | {"probe": 7.0})
    _stored(tmp_path, "20261128T121000Z-cccccc", 16, {"probe": 1.0}, partition="other")
    (tmp_path / "vet" / "20261128T121500Z-dddddd").mkdir()
    (tmp_path / "vet" / "20261128T121500Z-dddddd" / "vet.json").write_text("{cut")
    plan = planning.make_plan(site, names, planning.Options())
    # probe 6 (median of 5 and 7) + triad 20 + shm 25 + (7 rounds + 2 follow-up) x 30
    assert plan.wall_s == pytest.approx(6 + 20 + 25 + 9 * 30)
    assert "last 2 stored vetting(s) of partition lab, 16 nodes" in plan.text()


def test_a_plan_refused_leaves_no_empty_results_directory(
        lab_site: sitecfg.VetSite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = dataclasses.replace(lab_site, var=tmp_path)
    monkeypatch.setattr(vslurm, "max_step_count", lambda: 5)
    workdir = run.store_dir(site, "20261128T120000Z-eeeeee")
    with pytest.raises(InputError, match="MaxStepCount is 5"):
        run.measure_and_judge(site, [f"n{i}" for i in range(8)], run.Options(), workdir,
                              lambda _: None, "20261128T120000Z-eeeeee")
    assert not workdir.exists() and list((tmp_path / "vet").iterdir()) == []


class _Alloc:
    """An allocation whose steps answer from recorded output (no Slurm)."""

    def __init__(self, answers: list[StepResult]) -> None:
        self.answers = answers
        self.keys: list[str] = []

    def run(self, key: str, hosts: list[str], *args: object, **kw: object) -> StepResult:
        self.keys.append(key)
        return self.answers.pop(0)


def test_a_round_that_loses_a_node_names_it_and_keeps_the_first_output(
        lab_site: sitecfg.VetSite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 1 of the recorded 6-node lab run, once lost with lab-n4 (srun's
    words), then measured again without it: the node is named with the first
    line, both outputs are kept, each pair's cause names what happened."""
    (tmp_path / "raw").mkdir()
    text = (STEPS / "round1-6nodes.out").read_text()
    stderr = STDERR_NODE_LOST.replace("lab-n9", "lab-n4").replace("lab-n8", "lab-n2")
    cut = text.split("# All processes entering")[0].split("# Benchmarking")[0]
    alloc = _Alloc([StepResult("round1", 1, cut, stderr, 30.0),
                    StepResult("round1", 0, text, "", 20.0)])
    monkeypatch.setattr(measure, "nodes_info", lambda names: {})
    causes: dict[Pair, str] = {}
    lost: dict[str, str] = {}
    fn = measure.pair_measure(alloc, lab_site, measure.Settings(), tmp_path,  # type: ignore[arg-type]
                              lambda _: None, lambda: 5, {}, causes, lost)
    pairs = [("lab-n2", "lab-n6"), ("lab-n3", "lab-n4"), ("lab-n1", "lab-n5")]
    assert fn(0, pairs) == {}
    assert lost == {"lab-n4": f"round 1: {LAUNCH_FAILED.replace('lab-n9', 'lab-n4')}"}
    assert causes[("lab-n3", "lab-n4")] == lost["lab-n4"]
    assert "(the world ended with lab-n4: " in causes[("lab-n2", "lab-n6")]
    # again without lab-n4 (the recorded round: its group 0 is lab-n2<->lab-n6)
    got = fn(0, [pairs[0]])
    assert alloc.keys == ["round1", "round1-again1"] and list(got) == [pairs[0]]
    assert sorted(p.name for p in (tmp_path / "raw").iterdir()) == [
        "round1-again1.out", "round1.err", "round1.out"]
