"""The gate (`hpcval health`) and `hpcval vet` refuse bad input before they
measure: a stored vetting that is not one (not JSON, a key missing, a wrong
type, another site's, a copy), budgets and counts outside sense, node names
that are no node names, contradictory flags, a cluster whose MaxStepCount is
not a number; and `history --accept ''`, a tag with a newline.

Each case: exit 2 (wrong input; for the gate never 1, which a prolog passes on
as "drain this node"), one line naming the file or flag and the value, no
traceback, nothing measured (the gate's measurements take 15-30 s of CPU: each
case here takes about 1.5 s), nothing stored.
"""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path
from typing import Any

import pytest
from vet_recorded import stored as vettings

from .conftest import ROOT, TRACEBACK, Result, make_checkout, run, run_inprocess, tree_digest

#: CPU seconds of a refused command and all it started (Python, ReFrame's
#: configuration loader: about 1.5 s). The gate's measurements (probe, 5 triads
#: of 3 x 128 MiB, 5 PingPongs) take far more; wall time says nothing on a
#: machine shared with a lab (10 s for 0.9 s of CPU at load 23).
NOTHING_MEASURED_CPU_S = 6.0


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


#: Slurm's client commands, answering "not here": whatever a case does, it never
#: reaches a Slurm cluster that may be up on the machine (the lab), nor drains a node.
SLURM_COMMANDS = ("sinfo", "scontrol", "salloc", "srun", "scancel", "squeue", "sbatch")


@pytest.fixture(autouse=True)
def no_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    guard = tmp_path / "no-slurm"
    guard.mkdir()
    for name in SLURM_COMMANDS:
        (guard / name).write_text(f"#!/bin/sh\necho '{name}: no Slurm for this test' >&2\n"
                                  "exit 1\n")
        (guard / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{guard}:{os.environ['PATH']}")
    return guard


@pytest.fixture()
def var(tmp_path: Path) -> Path:
    """A results store holding the four recorded vettings of the lab."""
    base = tmp_path / "var"
    for r in vettings():
        d = base / "lab" / "vet" / r["id"]
        d.mkdir(parents=True)
        (d / "vet.json").write_text(json.dumps(r))
    return base


def latest(var: Path) -> Path:
    return sorted((var / "lab" / "vet").glob("*/vet.json"))[-1]


def edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def health(var: Path, *args: str, env: dict[str, str] | None = None) -> tuple[Result, float]:
    """``hpcval health --site lab ARGS`` and the CPU seconds it took, with all it started."""
    cpu = _children_cpu()
    res = run(ROOT, "health", "--site", "lab", *args,
              env={"HPCVAL_VAR": str(var), **(env or {})}, timeout=120)
    return res, _children_cpu() - cpu


def assert_refused(res: Result, cpu: float, *names: str, code: int = 2) -> str:
    """Exit ``code``, one line naming each of ``names``, no traceback, nothing
    measured (``cpu``: the command's CPU seconds)."""
    assert res.returncode == code, res.output
    assert TRACEBACK not in res.output, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1, res.output
    for name in names:
        assert name in lines[0], f"{name!r} not in {lines[0]!r}"
    assert cpu < NOTHING_MEASURED_CPU_S, f"{cpu:.1f} CPU seconds: it measured"
    return lines[0]


# ---- the gate's stored vettings ---------------------------------------------------------

def _drop_table(d: dict) -> None:
    del d["verdict"]["table"]


BAD_VETTINGS = {
    # issue case: a KeyError traceback after 21 s, exit 1 (read by a prolog as "node off")
    "key-missing": (_drop_table, "verdict.table"),
    "value-a-string": (lambda d: d["verdict"]["table"]["lab-n2"]["triad_bw"].update(
        value="fast"), "verdict.table.lab-n2.triad_bw.value"),
    "value-nan": (lambda d: d["verdict"]["table"]["lab-n2"]["cpu_mhz"].update(
        value=float("nan")), "verdict.table.lab-n2.cpu_mhz.value"),
    "nodes-not-a-list": (lambda d: d["verdict"].update(nodes="lab-n1,lab-n2"),
                         "verdict.nodes"),
    "another-sites": (lambda d: d.update(site="local"), "a vetting of site 'local'"),
}


@pytest.mark.parametrize("case", sorted(BAD_VETTINGS))
def test_a_stored_vetting_of_the_wrong_shape_is_refused_before_measuring(
        var: Path, case: str) -> None:
    change, key = BAD_VETTINGS[case]
    path = latest(var)
    edit(path, change)
    before = tree_digest(var)
    res, cpu = health(var, "--node", "lab-n2")
    assert_refused(res, cpu, str(path), key)
    assert tree_digest(var) == before  # nothing stored


def test_a_stored_vetting_that_is_not_json_is_named_not_skipped(var: Path) -> None:
    """Issue case: skipped without a word, the message printing a placeholder."""
    path = latest(var)
    path.write_text(path.read_text()[:2000])
    res, cpu = health(var, "--node", "lab-n2")
    assert_refused(res, cpu, str(path), "not JSON")


def test_a_stored_vetting_that_is_a_list_is_refused(var: Path) -> None:
    path = latest(var)
    path.write_text("[1, 2, 3]")
    res, cpu = health(var, "--node", "lab-n2")
    assert_refused(res, cpu, str(path), "a JSON list, not an object")


def test_a_vetting_copied_under_another_id_is_refused(var: Path) -> None:
    """A stale vetting copied into a new directory would count twice in the
    node's own history (and stand in as the latest)."""
    src = latest(var)
    copy_dir = src.parent.parent / "20261130T000000Z-00000f"
    copy_dir.mkdir()
    (copy_dir / "vet.json").write_text(src.read_text())
    res, cpu = health(var, "--node", "lab-n2")
    assert_refused(res, cpu, str(copy_dir / "vet.json"), "not the directory's name")


def test_without_any_vetting_the_message_names_the_store_not_a_placeholder(
        tmp_path: Path) -> None:
    res, cpu = health(tmp_path / "var", "--node", "lab-n2")
    line = assert_refused(res, cpu, str(tmp_path / "var" / "lab" / "vet"),
                          "run hpcval vet on the partition first")
    assert "<site>" not in line


# ---- the gate's arguments ---------------------------------------------------------------

@pytest.mark.parametrize("budget", ["-5", "0", "nan", "inf", "1e300", "1"])
def test_a_budget_outside_sense_is_refused(var: Path, budget: str) -> None:
    """Issue case: --budget -5 measured for 20 s and exited 3."""
    res, cpu = health(var, "--node", "lab-n2", "--budget", budget)
    assert_refused(res, cpu, "--budget")


@pytest.mark.parametrize("name", ["lab-n2;reboot", "../../etc/cron.d/x", "lab n2", "",
                                  "-lab-n2", "x" * 65])
def test_a_node_name_with_odd_characters_is_refused(var: Path, name: str) -> None:
    """The name goes into the stored file's name and to scontrol: a '/' would
    write outside var/<site>/health/."""
    res, cpu = health(var, f"--node={name}")
    assert_refused(res, cpu, "--node", repr(name))
    assert not (var / "lab" / "health").exists()


@pytest.mark.parametrize("samples", ["2", "1000000000"])
def test_a_sample_count_outside_sense_is_refused(var: Path, samples: str) -> None:
    res, cpu = health(var, "--node", "lab-n2", "--samples", samples)
    assert_refused(res, cpu, f"--samples {samples}")


@pytest.mark.parametrize("args,said", [
    (["--spread", "nan"], "--spread nan"),  # was taken as 0, without a word
    (["--confirm-delay", "inf", "inf"], "--confirm-delay inf"),  # was a traceback, exit 1
    (["--drain", "--drain-window", "nan"], "--drain-window nan"),  # was taken, measured
], ids=["spread-nan", "confirm-delay-inf", "drain-window-nan"])
def test_a_delay_or_drain_window_that_is_not_finite_is_refused(var: Path, args: list[str],
                                                               said: str) -> None:
    res, cpu = health(var, "--node", "lab-n2", *args)
    assert_refused(res, cpu, said)


def test_a_slurmd_nodename_with_odd_characters_is_refused(var: Path) -> None:
    res, cpu = health(var, env={"SLURMD_NODENAME": "lab-n2\nx"})
    assert_refused(res, cpu, "$SLURMD_NODENAME")


def test_a_partition_that_does_not_exist_is_refused(var: Path) -> None:
    res, cpu = health(var, "--node", "lab-n2", "--partition", "nope")
    assert_refused(res, cpu, "no Slurm partition 'nope'")


def test_a_node_no_vetting_measured_is_not_judged_and_not_drained(var: Path) -> None:
    res, cpu = health(var, "--node", "lab-n99", "--drain")
    assert_refused(res, cpu, "lab-n99", "run hpcval vet on the partition first")


# ---- hpcval vet's arguments and the cluster's MaxStepCount ------------------------------

VET_ARGS = {
    "samples-a-billion": (["--samples", "1000000000"], "--samples 1000000000"),
    "samples-two": (["--samples", "2"], "--samples 2"),
    "max-rounds-negative": (["--max-rounds", "-1"], "--max-rounds -1"),
    "max-rounds-zero": (["--max-rounds", "0"], "--max-rounds 0"),
    "min-effect-nan": (["--min-effect", "nan"], "--min-effect nan"),
    "min-effect-zero": (["--min-effect", "0"], "--min-effect 0"),
    "min-effect-above-1": (["--min-effect", "1.5"], "--min-effect 1.5"),
    "follow-up-negative": (["--follow-up", "-1"], "--follow-up -1"),
    "peers-zero": (["--gate", "lab-n1", "--peers", "0"], "--peers 0"),
    "gate-with-drain": (["--gate", "lab-n1", "--drain"], "--gate lab-n1 with --drain"),
    "gate-with-nodes": (["--gate", "lab-n1", "--nodes", "lab-n[1-4]"], "with --nodes"),
    "gate-odd-name": (["--gate", "lab-n1,lab-n2"], "--gate 'lab-n1,lab-n2'"),
}


@pytest.mark.parametrize("case", sorted(VET_ARGS))
def test_vet_refuses_arguments_outside_sense(tmp_path: Path, case: str) -> None:
    """Issue cases: --max-rounds -1 and --min-effect nan were taken (with nan no
    node can ever be named)."""
    args, said = VET_ARGS[case]
    var = tmp_path / "var"
    cpu = _children_cpu()
    res = run(ROOT, "vet", "--site", "lab", *args, env={"HPCVAL_VAR": str(var)}, timeout=120)
    assert_refused(res, _children_cpu() - cpu, said)
    assert not var.exists()  # no vetting directory made


def _fake_slurm(bin_dir: Path, max_step_count: str) -> None:
    """Slurm's client commands answering as a 4-node cluster whose `scontrol show
    config` prints ``MaxStepCount = <max_step_count>``. slurmctld itself refuses
    such a slurm.conf, so only a broken or foreign scontrol can print it: a
    script stands in for it here (the real lab: tests/lab)."""
    bin_dir.mkdir()
    nodes = " ".join(f"lab-n{i}" for i in range(1, 5))
    (bin_dir / "sinfo").write_text(f"#!/bin/sh\nfor n in {nodes}; do echo $n; done\n")
    (bin_dir / "scontrol").write_text(
        "#!/bin/sh\n"
        'case "$1 $2" in\n'
        f'  "show node") for n in {nodes}; do echo "NodeName=$n State=IDLE '
        'Partitions=lab"; done ;;\n'
        f'  "show config") echo "MaxStepCount            = {max_step_count}" ;;\n'
        '  "show topology") exit 0 ;;\n'
        '  *) echo "unexpected: $*" >&2; exit 1 ;;\n'
        "esac\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)


def test_a_max_step_count_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    """Issue case: `MaxStepCount = lots` silently became Slurm's default 40,000."""
    _fake_slurm(tmp_path / "bin", "lots")
    cpu = _children_cpu()
    res = run(ROOT, "vet", "--site", "lab", "--quiet",
              env={"HPCVAL_VAR": str(tmp_path / "var"),
                   "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}, timeout=120)
    assert res.returncode == 2, res.output
    assert TRACEBACK not in res.output
    assert "MaxStepCount = 'lots'" in res.error_line(), res.output
    assert _children_cpu() - cpu < NOTHING_MEASURED_CPU_S


# ---- history and validate ---------------------------------------------------------------

@pytest.mark.parametrize("flag,value", [("--accept", ""), ("--reject", ""), ("--accept", "  ")])
def test_history_accept_of_an_empty_run_id_is_refused(tmp_path: Path, flag: str,
                                                      value: str) -> None:
    """Issue case: `history --accept ""` exited 0 and did nothing."""
    res = run(ROOT, "history", "--site", "local", flag, value,
              env={"HPCVAL_VAR": str(tmp_path / "var")})
    assert res.returncode == 2, res.output
    assert TRACEBACK not in res.output
    assert f"history {flag} {value!r}: give a run id" in res.error_line(), res.output


@pytest.mark.parametrize("tag", ["nic=gv\nnic", "nic=a\tb", "nic=\x1b[31mred"])
def test_a_tag_with_a_control_character_is_refused_before_the_run(tmp_path: Path,
                                                                   tag: str) -> None:
    """Issue case: a newline in a --tag value was stored and broke the history
    listing."""
    var = tmp_path / "var"
    res = run(ROOT, "validate", "--site", "local", "--tag", tag, env={"HPCVAL_VAR": str(var)},
              timeout=120)
    assert res.returncode == 2, res.output
    assert TRACEBACK not in res.output
    assert "control character" in res.error_line() and repr(tag) in res.error_line()
    assert not var.exists()  # nothing ran, nothing stored


def test_the_health_of_a_bad_vetting_is_stored_nowhere(var: Path) -> None:
    """The refused gate leaves the store as it was (no health record, no vetting
    changed)."""
    path = latest(var)
    edit(path, lambda d: d["verdict"].update(judged="yes"))
    before = tree_digest(var)
    res, cpu = health(var, "--node", "lab-n2", "--drain")
    assert_refused(res, cpu, "verdict.judged")
    assert tree_digest(var) == before


def test_a_fault_of_hpcval_itself_exits_3_never_1(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Python ends an uncaught exception with exit 1, which a prolog passes on as
    "drain this node": a bug in the gate (here one planted in its judging) is one
    line and exit 3, the node not drained."""
    import shutil

    from hpcval.commands import health as command

    def broken(*_: object, **__: object) -> None:
        raise ZeroDivisionError("planted")

    root = make_checkout(tmp_path)
    shutil.copytree(ROOT / "site-configs" / "lab", root / "site-configs" / "lab")
    monkeypatch.setattr(command, "judge_health", broken)
    res = run_inprocess(root, "health", "--site", "lab", "--node", "lab-n2", "--drain",
                        monkeypatch=monkeypatch, capsys=capsys)
    assert res.returncode == 3, res.output
    assert TRACEBACK not in res.output
    [line] = res.output.strip().splitlines()
    assert "not judged: hpcval failed (ZeroDivisionError at " in line, line
    assert "the node is not drained" in line
