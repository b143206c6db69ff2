"""The steps of a vetting: how many, what each srun runs, how their output is read,
and what is left unmeasured. Outputs are recorded srun steps of a 6-node lab
(tests/data/vet/steps/README.md); nothing here needs Slurm."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.core.errors import InputError
from hpcval.node import sizing
from hpcval.vet import measure, run, sitecfg
from hpcval.vet import slurm as vslurm
from hpcval.vet.campaign import Campaign
from hpcval.vet.slurm import StepResult

DATA = Path(__file__).resolve().parents[1] / "data" / "vet" / "steps"
LAB = [f"lab-n{i}" for i in range(1, 7)]


def step(name: str, stderr: str = "", rc: int = 0) -> StepResult:
    return StepResult(name, rc, (DATA / name).read_text(), stderr, 1.0)


def test_probe_lines_cut_by_srun_are_joined_per_task() -> None:
    """srun --label cut each task's long result line into labelled pieces."""
    res = step("probe-6nodes.out")
    assert sum(ln.startswith("5: ") for ln in res.stdout.splitlines()) > 1
    got = measure._task_lines(res, LAB)
    assert sorted(got) == LAB
    assert all(got[n]["host"] == n and len(got[n]["cpu_mhz"]) == 5 for n in LAB)
    assert len({got[n]["boot_id"] for n in LAB}) == 1  # one machine


def test_a_task_without_its_line_is_named_with_srun_s_words() -> None:
    res = step("probe-6nodes.out", "srun: error: lab-n4: task 3: Killed\n", rc=137)
    lines = [ln for ln in res.stdout.splitlines() if not ln.lstrip().startswith("3: ")]
    res.stdout = "\n".join(lines) + "\n"
    got = measure._task_lines(res, LAB)
    assert "lab-n4" not in got and len(got) == 5
    assert measure._task_cause(res, "lab-n4", 3) == "srun: error: lab-n4: task 3: Killed"


def test_shared_memory_pingpong_of_every_node_in_one_world() -> None:
    got, lost = measure.multi_pingpong(step("shm-pingpong-6nodes.out").stdout,
                                       [(n, n) for n in LAB], "shm")
    assert lost == {} and sorted(got) == list(range(6))
    bw, lat = got[2]
    assert len(bw) == 5 and len(lat) == 5 and min(bw) > 100


def test_round_groups_are_the_round_s_pairs() -> None:
    pairs = [("lab-n2", "lab-n6"), ("lab-n3", "lab-n4"), ("lab-n1", "lab-n5")]
    got, lost = measure.multi_pingpong(step("round1-6nodes.out").stdout, pairs, "round 1")
    assert lost == {}
    # lab-n3's link was at 100m (12.5 MB/s), the others at 1g
    assert max(got[1][0]) < 13 < min(got[0][0] + got[2][0])


def test_a_group_placed_elsewhere_than_planned_is_not_taken() -> None:
    pairs = [("lab-n2", "lab-n6"), ("lab-n4", "lab-n3"), ("lab-n1", "lab-n5")]
    got, lost = measure.multi_pingpong(step("round1-6nodes.out").stdout, pairs, "round 1")
    assert sorted(got) == [0, 2]
    assert lost[1] == "ranks 2-3 ran on lab-n3+lab-n4, not lab-n4+lab-n3"


def test_hosts_named_otherwise_than_nodes_are_checked_for_consistency() -> None:
    hosts = {0: "c001.x", 1: "c002.x", 2: "c001.x", 3: "c003.x"}
    assert measure._misplaced(hosts, ["n1", "n2", "n1", "n3"]) == set()
    assert measure._misplaced(hosts, ["n1", "n2", "n3", "n4"]) == {"n3"}


def test_a_killed_world_loses_every_group() -> None:
    text = step("round1-6nodes.out").stdout.split("# All processes entering")[0]
    got, lost = measure.multi_pingpong(text, [("lab-n2", "lab-n6"), ("lab-n3", "lab-n4"),
                                              ("lab-n1", "lab-n5")], "round 1")
    assert got == {} and set(lost) == {0, 1, 2}
    assert "crashed or was killed" in lost[0]


def test_a_step_places_its_tasks_by_a_host_file(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vslurm, "_require", lambda prog: prog)
    alloc = vslurm.Allocation(LAB, "lab", 10)
    alloc.job_id = "42"
    cmd, env = alloc.step([h for n in LAB[:2] for h in (n, n)], ["IMB-MPI1"],
                          tmp_path / "hf", mpi="pmi2")
    assert (tmp_path / "hf").read_text().split() == ["lab-n1", "lab-n1", "lab-n2", "lab-n2"]
    assert env == {"SLURM_HOSTFILE": str(tmp_path / "hf")}
    assert "--distribution=arbitrary" in cmd and "--ntasks=4" in cmd and "--nodes=2" in cmd
    assert not any(c.startswith("--nodelist") for c in cmd)  # it would override the file
    assert "--kill-on-bad-exit=1" in cmd and "--label" not in cmd
    cmd, _ = alloc.step(LAB, ["probe"], tmp_path / "hf2", independent=True)
    assert "--kill-on-bad-exit=0" in cmd and "--label" in cmd and "--mpi=none" in cmd


@pytest.fixture(scope="module")
def lab_site() -> sitecfg.VetSite:
    return sitecfg.load("lab", None, "impi")


@pytest.mark.parametrize("nodes", [2, 6, 64, 4096, 16384])
def test_the_plan_s_steps_do_not_grow_with_the_nodes(lab_site: sitecfg.VetSite,
                                                     nodes: int) -> None:
    names = [f"n{i}" for i in range(nodes)]
    plan = run.make_plan(lab_site, names, run.Options())
    # 3 per-node, the rounds, 2 follow-up, 1 measured again without a lost node, up to
    # 4 confirming per-node suspects
    assert plan.steps == 3 + min(nodes - 1 + nodes % 2, 7) + 2 + 1 + 4 <= 20
    assert "at most" in plan.text() and "expected wall time" in plan.text()


def test_a_plan_past_max_step_count_is_refused_with_the_numbers(
        lab_site: sitecfg.VetSite) -> None:
    plan = run.make_plan(lab_site, [f"n{i}" for i in range(512)],
                         run.Options(max_rounds=511))
    run.check_plan(plan, 40000)
    with pytest.raises(InputError, match=r"up to 521 srun steps .*511 rounds \+ 2 follow-up "
                       r"\+ 1 again \+ 4 confirming\) .* MaxStepCount is 500 "):
        run.check_plan(plan, 500)


def test_memory_per_node_divides_a_shared_machine() -> None:
    probes = {f"n{i}": {"mem_available": 32 << 30, "boot_id": "a"} for i in range(32)}
    probes["m1"] = {"mem_available": 64 << 30, "boot_id": "b"}
    per_node, where = measure.memory_per_node(probes)
    assert per_node == 1 << 30 and "shared by 32 nodes" in where


def test_the_triad_is_bounded_by_the_memory_per_node(lab_site: sitecfg.VetSite) -> None:
    settings = measure.Settings()
    size = measure.bounded_triad_size(lab_site, settings, 4 << 30, "4 GiB")
    assert size.params["triad_n"] == 16_778_000  # 4x the 32 MiB L3, 384 MiB in all
    with pytest.raises(sizing.SizingError, match=r"give --triad-n at most 11,184,810"):
        measure.bounded_triad_size(lab_site, settings, 512 << 20, "on 32 nodes")
    settings.triad_n = 20_000_000
    with pytest.raises(sizing.SizingError, match=r"458 MiB exceed 50% of the 512 MiB"):
        measure.bounded_triad_size(lab_site, settings, 512 << 20, "x")
    settings.triad_n = 2_000_000
    assert measure.bounded_triad_size(lab_site, settings, 512 << 20, "x").params[
        "triad_n"] == 2_000_000


def test_what_was_not_measured_is_named_with_its_cause() -> None:
    samples = measure.NodeSamples(unmeasured={"lab-n2": ["triad: triad sample 3: killed by "
                                                         "SIGKILL"]})
    camp = Campaign(rounds=[[("lab-n1", "lab-n2"), ("lab-n3", "lab-n4")]],
                    samples={("lab-n1", "lab-n2"): [50.0] * 5},
                    failed=[("lab-n3", "lab-n4")])
    out = run.unmeasured(["lab-n1", "lab-n2", "lab-n3", "lab-n4"], samples, camp,
                         {("lab-n3", "lab-n4"): "round 1: srun: error: lab-n4: task 3: Killed"})
    assert out == [
        {"kind": "node", "name": "lab-n2", "cause": "triad: triad sample 3: killed by SIGKILL"},
        {"kind": "pair", "name": "lab-n3<->lab-n4",
         "cause": "round 1: srun: error: lab-n4: task 3: Killed"},
        {"kind": "node", "name": "lab-n3", "cause": "none of its pairs was measured"},
        {"kind": "node", "name": "lab-n4", "cause": "none of its pairs was measured"},
    ]
