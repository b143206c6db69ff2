"""The per-node gate (`hpcval health`, hpcval.vet.health): its judging against
stored vettings made from the pair and node samples recorded on the lab
(tests/data/vet, judged again by the vetting's own code), and one real run on
this machine (probe, cfdio triad and IMB shared-memory PingPong, no Slurm)
against stored vettings scaled far above and far below anything it can
measure, so that its verdict does not hang on the machine's load."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from vet_recorded import DATA, stored

from hpcval.core.errors import InputError
from hpcval.vet.health import judge_health
from hpcval.vet.judge import JudgeSettings

ROOT = Path(__file__).resolve().parent.parent.parent


def own_samples(name: str, node: str) -> dict[str, list[float]]:
    data = json.loads((DATA / f"{name}.json").read_text())
    return {f: list(s[node]) for f, s in data["node_samples"].items()}


def test_a_node_like_its_partition_passes() -> None:
    verdict = judge_health("lab-n2", own_samples("slow-30pct", "lab-n2"), [], stored(),
                           JudgeSettings())
    assert verdict.ok, verdict
    assert verdict.reference == "20261123T000000Z-000003"  # the latest full vetting
    line = verdict.line(12.0)
    assert line.startswith("health lab-n2: OK in 12 s: triad ") and "\n" not in line
    # each figure against the partition and against the node's own accepted history
    assert [y["against"] for y in verdict.figures["triad_bw"]["yardsticks"]] == [
        "partition", "own history"]


def test_a_slow_clock_is_named_against_the_partition_and_the_history() -> None:
    """A node whose CPU clock dropped 20 % (a power cap, a missed governor): the
    lab's nodes all read 2,596 MHz, so against the 2 % floor of the yardstick
    and the 10 % practical minimum it is off against both."""
    samples = own_samples("slow-30pct", "lab-n2")
    samples["cpu_mhz"] = [0.8 * x for x in samples["cpu_mhz"]]
    verdict = judge_health("lab-n2", samples, [], stored(), JudgeSettings())
    assert not verdict.ok
    assert [e.split(" (")[0] for e in verdict.evidence] == ["CPU frequency 2,077 MHz"] * 2
    assert "20 % below the partition median 2,596 MHz" in verdict.evidence[0]
    assert "below its own median 2,596 MHz over 4 accepted vettings" in verdict.evidence[1]
    assert verdict.line().startswith("health lab-n2: NO: CPU frequency ")


def test_on_the_labs_scatter_a_fifth_of_the_triad_is_not_named() -> None:
    """What the gate cannot do where the partition's own figures scatter: the
    lab's six triads share 2 cores (4.7-15.8 GB/s in one vetting), so a node at
    a fifth of its triad is 46 % below the partition median at robust z 1.7 only,
    not named (the vetting's rules: effect *and* z)."""
    samples = own_samples("slow-30pct", "lab-n2")
    samples["triad_bw"] = [0.2 * x for x in samples["triad_bw"]]
    verdict = judge_health("lab-n2", samples, [], stored(), JudgeSettings())
    [part, _] = verdict.figures["triad_bw"]["yardsticks"]
    assert part["worse_by"] > 0.4 and part["z"] < 3.5 and verdict.ok


def test_a_named_node_is_neither_its_own_yardstick_nor_the_partitions() -> None:
    """lab-n3 was named in two of the stored vettings: only the others count as
    its accepted history, and the named nodes of the reference are left out of
    the partition."""
    results = stored()
    verdict = judge_health("lab-n3", own_samples("all-healthy", "lab-n3"), [], results,
                           JudgeSettings())
    accepted = [r for r in results if "lab-n3" not in r["verdict"]["named_nodes"]]
    assert len(accepted) == 2
    assert any("own history, fewer than 3" in n for n in verdict.notes)


def test_a_tuning_mismatch_says_no() -> None:
    audit = copy.deepcopy(json.loads((DATA / "all-healthy.json").read_text())["audit"]["lab-n2"])
    audit[0].update(status="mismatch", found="never-seen")
    verdict = judge_health("lab-n2", own_samples("slow-30pct", "lab-n2"), audit, stored(),
                           JudgeSettings())
    assert not verdict.ok and verdict.evidence[-1].startswith("tuning audit: ")


def test_without_a_full_vetting_there_is_nothing_to_judge_against() -> None:
    with pytest.raises(InputError, match="run hpcval vet on the partition first"):
        judge_health("lab-n2", {}, [], [], JudgeSettings())
    with pytest.raises(InputError):
        judge_health("lab-n9", {}, [], stored(), JudgeSettings())


needs_mpi = pytest.mark.skipif(
    not (shutil.which("mpiexec", path=str(Path(sys.executable).parent))
         and shutil.which("IMB-MPI1", path=str(Path(sys.executable).parent))),
    reason="Intel MPI and IMB-MPI1 in the environment (make setup)")


@needs_mpi
@pytest.mark.parametrize("scale,code", [(100.0, 1), (0.01, 0)], ids=["far-below", "far-above"])
def test_hpcval_health_measures_this_node_and_says_one_line(tmp_path: Path, scale: float,
                                                           code: int) -> None:
    """A real run: the stored partition scaled 100x above (the node is far below
    it: no, exit 1) and 100x below (ok, exit 0); one line, the result stored."""
    for r in stored(scale):
        d = tmp_path / "var" / "lab" / "vet" / r["id"]
        d.mkdir(parents=True)
        (d / "vet.json").write_text(json.dumps(r))
    env = dict(os.environ, HPCVAL_VAR=str(tmp_path / "var"),
               PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run([sys.executable, "-m", "hpcval.cli", "health", "--site", "lab",
                           "--node", "lab-n2", "--samples", "3"], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout + proc.stderr
    if not code and proc.returncode == 3:  # this machine was too busy to judge the CPU share
        assert lines[0].startswith("health lab-n2: not judged in ") and "busy" in lines[0]
        return
    assert proc.returncode == code, lines[0] + proc.stderr
    assert lines[0].startswith(f"health lab-n2: {'NO' if code else 'OK'} in ")
    if code:
        assert "below the partition median" in lines[0]
    [saved] = (tmp_path / "var" / "lab" / "health").glob("*-lab-n2.json")
    record = json.loads(saved.read_text())
    assert record["line"] == lines[0]
    # what the probe read of the node is kept beside the samples (health.READINGS)
    assert {"cpu", "kernel", "memory"} <= set(record["samples"]["fingerprint"])
    assert isinstance(record["samples"]["counters"], dict)
