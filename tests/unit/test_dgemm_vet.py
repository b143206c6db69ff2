"""DGEMM in vet and health: the probe's ``--dgemm`` mode (the real runner), the
per-node size, the plan's extra step, and health's judging of ``dgemm_gflops``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hpcval.node import sizing
from hpcval.vet import dgemmstep, health, measure, probe
from hpcval.vet.judge import FIGURES, JudgeSettings
from hpcval.vet.sitecfg import VetSite


def _site(tmp_path: Path, cpus: int = 2, mem: int = 16 * sizing.GIB) -> VetSite:
    return VetSite("lab", tmp_path, tmp_path / "var", "lab", "default", "lab", "impi",
                   node=sizing.Node(cpus, 32 * sizing.MIB, mem))


def test_probe_dgemm_mode_prints_the_interface(capsys: pytest.CaptureFixture[str]) -> None:
    assert probe.main(["--dgemm", "--dgemm-n=128", "--samples=3"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(probe.MARKER)
    data = json.loads(line[len(probe.MARKER):])
    assert data["errors"] == []
    d = data["dgemm"]
    assert d["n"] == 128 and len(d["gflops"]) == 3 and all(g > 0 for g in d["gflops"])
    assert isinstance(d["blas"], str) and d["blas"]
    assert d["peak_gflops"] is None or d["peak_gflops"] > 0


def test_probe_dgemm_failure_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert probe.main(["--dgemm", "--dgemm-n=10", "--samples=3"]) == 0
    data = json.loads(capsys.readouterr().out.strip()[len(probe.MARKER):])
    assert data["dgemm"]["gflops"] == []
    assert data["errors"] and "order of at least 64" in data["errors"][0]


def test_dgemm_size_splits_a_shared_machine_and_bounds_memory(tmp_path: Path) -> None:
    site = _site(tmp_path, cpus=8)
    alone = dgemmstep.dgemm_size(site, measure.Settings(dgemm=True), None)
    shared = dgemmstep.dgemm_size(site, measure.Settings(dgemm=True), None, shared_by=8)
    assert shared.params["n"] < alone.params["n"]
    with pytest.raises(sizing.SizingError, match="--dgemm-n 20000"):
        dgemmstep.dgemm_size(site, measure.Settings(dgemm=True, dgemm_n=20000), sizing.GIB)
    probes = {"a": {"boot_id": "x"}, "b": {"boot_id": "x"}, "c": {"boot_id": "y"}}
    assert measure.sharing(probes) == 2


def test_health_judges_dgemm_against_the_vetting_that_measured_it() -> None:
    nodes = [f"n{i}" for i in range(6)]
    table = {n: {"dgemm_gflops": {"value": 50.0 + i}} for i, n in enumerate(nodes)}
    ref = {"id": "20261128T000000Z-aaaaaa", "sizes": {"dgemm_gflops": {"n": "1024"}},
           "verdict": {"nodes": nodes, "table": table, "named_nodes": []}}
    assert health.dgemm_of(ref) == {"n": "1024"}
    timed = {**ref, "step_seconds": {"dgemm": 12.0},
             "node_samples": {"dgemm_gflops": {n: [1.0] * 5 for n in nodes}}}
    assert health.dgemm_of(timed) == {"n": "1024", "seconds": "2.000"}
    slow = health.judge_health("n0", {"dgemm_gflops": [20.0, 21.0, 22.0]}, [], [ref],
                               JudgeSettings())
    assert not slow.ok and any(e.startswith(FIGURES["dgemm_gflops"].label)
                               for e in slow.evidence)
    fine = health.judge_health("n0", {"dgemm_gflops": [52.0, 53.0, 51.0]}, [], [ref],
                               JudgeSettings())
    assert fine.ok
    # a vetting without DGEMM: nothing measured, nothing judged, no note
    del ref["sizes"]
    quiet = health.judge_health("n0", {}, [], [ref], JudgeSettings())
    assert health.dgemm_of(ref) is None and not any("DGEMM" in n for n in quiet.notes)


def test_the_plan_counts_and_names_the_dgemm_step(tmp_path: Path) -> None:
    from hpcval.vet import planning

    site = _site(tmp_path)
    names = [f"n{i}" for i in range(8)]
    without = planning.make_plan(site, names, planning.Options())
    opts = planning.Options(settings=measure.Settings(dgemm=True))
    plan = planning.make_plan(site, names, opts)
    assert plan.node_steps == without.node_steps + 1 and plan.steps == without.steps + 1
    assert "shared-memory PingPong, DGEMM;" in plan.text() and "GPU" not in plan.text()
    assert plan.wall_s > without.wall_s
    # recorded: the DGEMM step's own median time
    steps = {"probe": 2.0, "triad": 10.0, "shm-pingpong": 5.0, "round1": 3.0, "dgemm": 40.0}
    d = tmp_path / "var" / "vet" / "20261128T120000Z-aaaaaa"
    d.mkdir(parents=True)
    (d / "vet.json").write_text(json.dumps({"partition": "lab", "step_seconds": steps,
                                            "verdict": {"nodes": names}}))
    assert planning.make_plan(site, names, opts).wall_s == pytest.approx(
        planning.make_plan(site, names, planning.Options()).wall_s + 40.0)


def test_health_measures_dgemm_only_within_its_budget() -> None:
    env = dict(os.environ)
    short = health._Clock(5.0)
    assert health.measure_dgemm(short, env, {"n": "128", "seconds": "2.0"}) == []
    got = health.measure_dgemm(health._Clock(60.0), env, {"n": "128", "seconds": "0.01",
                                                           "threads": "1"})
    assert len(got) == health.DGEMM_SAMPLES and all(g > 0 for g in got)
