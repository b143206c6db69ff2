"""The gate's yardstick when many nodes measure at once (hpcval.vet.healthstorm):
busy passes decide nothing for CPU-bound figures, the CPU share against its
fair share, a finding confirmed by a second pass after a random delay, and the
limits a job's task gets on the node."""

from __future__ import annotations

import os
import random
import resource
from pathlib import Path
from typing import Any

import pytest

from hpcval.vet import healthstorm
from hpcval.vet.healthstorm import Contention, PassResult, add_up, classify, confirm_loop


def reading(others: float, share: float, cpus: int = 2) -> Contention:
    return Contention(cpus, others, share, 0.5)


def figures(off: dict[str, bool]) -> dict[str, dict[str, Any]]:
    """judge_health's figures: each with one partition yardstick, off or not."""
    return {f: {"value": 100.0, "yardsticks": [{"against": "partition", "center": 400.0,
                                                "worse_by": 0.75, "z": 5.0, "off": o}]}
            for f, o in off.items()}


def test_fair_share_and_busy() -> None:
    assert reading(0, 1.0).fair == 1.0 and not reading(0, 1.0).busy
    assert reading(1, 1.0).fair == 1.0  # 2 tasks on 2 CPUs: a whole CPU each
    assert reading(3, 0.5).fair == 0.5 and not reading(3, 0.5).busy
    assert reading(15, 0.12).fair == 0.125 and reading(15, 0.12).busy  # 16 gates, 2 cores
    assert reading(0, 0.25).relative == 0.25


def test_a_storm_pass_is_no_evidence_for_the_cpu_bound_figures() -> None:
    off = figures({"triad_bw": True, "shm_pingpong_bw_1MiB": True, "cpu_mhz": True})
    status, evidence = classify(off, [], [reading(15, 0.12), reading(12, 0.14)])
    assert status == {"triad_bw": "busy", "shm_pingpong_bw_1MiB": "busy", "cpu_mhz": "off",
                      "cpu_share": "busy", "tuning": "ok"}
    assert list(evidence) == ["cpu_mhz"]
    assert evidence["cpu_mhz"] == ("CPU frequency 100 MHz (75 % below the partition median "
                                   "400 MHz, z 5.0)")
    # a good figure is good however busy the node was
    status, _ = classify(figures({"triad_bw": False}), [], [reading(15, 0.12)])
    assert status["triad_bw"] == "ok"


def test_the_cpu_share_is_off_only_where_half_a_cpu_was_fair() -> None:
    """A cgroup quota of 25 % of one CPU: 0.25 where a whole CPU was fair is
    off; the same 0.25 where 16 gates share 2 cores (fair 0.125) says nothing;
    one reading at its fair share clears the pass."""
    status, evidence = classify({}, [], [reading(0, 0.26), reading(0.5, 0.24)])
    assert status["cpu_share"] == "off"
    assert evidence["cpu_share"] == ("CPU share 0.26 of a CPU where 1.00 was fair (0.0 other "
                                     "runnable task(s) on 2 CPU(s)), 26 % of it")
    assert classify({}, [], [reading(15, 0.25)])[0]["cpu_share"] == "busy"
    assert classify({}, [], [reading(0, 0.25), reading(0, 0.9)])[0]["cpu_share"] == "ok"
    assert classify({}, [], [reading(3, 0.24)])[0]["cpu_share"] == "off"  # fair 0.5
    assert classify({}, ["rlimit_nofile found '256'"], [reading(0, 1)])[0]["tuning"] == "off"


def one(status: dict[str, str], started: float = 0.0) -> PassResult:
    ev = {f: f"{f} evidence at {started:.0f}" for f, s in status.items() if s == "off"}
    return PassResult(started, 5.0, [reading(0, 1.0)], status, ev)


def test_two_off_passes_confirm_one_ok_clears_busy_decides_nothing() -> None:
    c = add_up([one({"triad_bw": "off", "cpu_share": "busy"}, 0),
                one({"triad_bw": "off", "cpu_share": "busy"}, 10)])
    assert c.confirmed == {"triad_bw": "triad_bw evidence at 10"}
    assert c.undecided == ["cpu_share"]
    c = add_up([one({"triad_bw": "off"}), one({"triad_bw": "ok"})])
    assert c.confirmed == {} and c.cleared == ["triad_bw"]
    c = add_up([one({"triad_bw": "busy"}), one({"triad_bw": "off"})])
    assert c.confirmed == {} and c.undecided == ["triad_bw"]  # one judged pass: not confirmed


def test_the_loop_waits_a_random_delay_and_stops_when_decided() -> None:
    script = iter([{"triad_bw": "off", "cpu_mhz": "ok"}, {"triad_bw": "busy"},
                   {"triad_bw": "off"}, {"triad_bw": "off"}])
    waits: list[float] = []
    c = confirm_loop(lambda _b, _l: one(next(script)), budget=100, delay=(2, 10),
                     rng=random.Random(1), sleep=waits.append)
    assert list(c.confirmed) == ["triad_bw"] and len(c.passes) == 3
    assert len(waits) == 2 and all(2 <= w <= 10 for w in waits) and waits[0] != waits[1]
    # a first pass where everything is ok: no second pass, no delay
    waits.clear()
    c = confirm_loop(lambda _b, _l: one({"triad_bw": "ok"}), 100, (2, 10), sleep=waits.append)
    assert len(c.passes) == 1 and waits == []


def test_the_loop_stops_before_the_budget_would_end_a_pass() -> None:
    notes: list[str] = []
    c = confirm_loop(lambda _b, _l: one({"triad_bw": "off"}), budget=11, delay=(5, 5),
                     sleep=lambda _s: None, log=notes.append)
    assert len(c.passes) == 1 and c.undecided == ["triad_bw"]  # 5 s + 1.3 x 5 s > 11 s
    assert notes and notes[0].startswith("no time for another pass")


def test_while_the_cpu_share_is_undecided_the_next_pass_is_light() -> None:
    """A storm pass: the CPU share busy, the triad off but busy. The next passes
    are the spins alone until the share is decided, then a full one."""
    asked: list[bool] = []
    script = iter([{"triad_bw": "busy", "cpu_share": "busy"}, {"cpu_share": "busy"},
                   {"cpu_share": "ok"}, {"triad_bw": "ok", "cpu_share": "ok"}])

    def measure(_budget: float, light: bool) -> PassResult:
        asked.append(light)
        return one(next(script))

    c = confirm_loop(measure, 100, (2, 10), sleep=lambda _s: None)
    assert asked == [False, True, True, False]
    assert c.confirmed == {} and c.undecided == [] and c.cleared == []


def test_a_figure_off_once_gets_its_full_pass_before_the_light_ones() -> None:
    """A CPU clock off in a storm pass waits for a full pass to be confirmed:
    light passes alone would never measure it again."""
    asked: list[bool] = []
    script = iter([{"cpu_mhz": "off", "triad_bw": "busy", "cpu_share": "busy"},
                   {"cpu_mhz": "off", "triad_bw": "busy", "cpu_share": "busy"}])

    def measure(_budget: float, light: bool) -> PassResult:
        asked.append(light)
        return one(next(script))

    c = confirm_loop(measure, 100, (2, 10), sleep=lambda _s: None)
    assert asked == [False, False] and list(c.confirmed) == ["cpu_mhz"]


def test_spin_counts_the_other_runnable_tasks(tmp_path: Path) -> None:
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("7.52 6.10 4.00 9/812 12345\n")  # 9 runnable, the spin one of them
    c = healthstorm.spin(0.05, loadavg, cpus=2)
    assert c.others == 8 and c.fair == pytest.approx(2 / 9)
    assert 0 < c.share <= 1.05 and c.seconds >= 0.05
    assert healthstorm.running_tasks(Path("/proc/loadavg").read_text()) >= 1


def fake_proc(root: Path, pid: int, argv: list[str], nofile: str) -> None:
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (d / "limits").write_text(
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        f"Max open files            {nofile}                 bytes     \n"
        "Max locked memory         8388608              8388608              bytes     \n")


def test_the_nodes_limits_are_those_of_its_slurmd(tmp_path: Path) -> None:
    """On the lab several slurmd share one kernel: the one started for the
    node (``-N lab-n3``) gives the limits; without any slurmd, PID 1."""
    fake_proc(tmp_path, 1, ["/sbin/init"], "524288               524288")
    fake_proc(tmp_path, 40, ["slurmd", "-f", "/etc/slurm/slurm.conf", "-N", "lab-n2"],
              "2048                 4096")
    fake_proc(tmp_path, 41, ["/usr/sbin/slurmd", "-N", "lab-n3"], "1024                 4096")
    source, limits = healthstorm.node_limits("lab-n3", tmp_path)
    assert source == "slurmd (41)"
    assert limits[resource.RLIMIT_NOFILE] == (1024, 4096)
    assert limits[resource.RLIMIT_MEMLOCK] == (8388608, 8388608)
    source, limits = healthstorm.node_limits("lab-n9", tmp_path)
    assert source == "PID 1 (1)" and limits[resource.RLIMIT_NOFILE] == (524288, 524288)


def test_a_shells_ulimit_is_not_the_nodes(tmp_path: Path) -> None:
    """``ulimit -n 256`` in the launching shell: the gate takes the node's own
    limit for itself and every task it starts (what ``srun --propagate=NONE``
    gives a job's tasks); where it may not raise the hard limit (no
    CAP_SYS_RESOURCE, as in some containers) the limit is not judged: the
    audit's finding of 256 is left out of the evidence."""
    import subprocess
    import sys
    code = ("import resource; from hpcval.vet import healthstorm as h; "
            "print(h.take_node_limits('no-such-node')); "
            "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])")
    _source, limits = healthstorm.node_limits("no-such-node")
    soft = limits[resource.RLIMIT_NOFILE][0]
    want = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
    proc = subprocess.run(["sh", "-c", f"ulimit -n 256 && exec {sys.executable} -c \"{code}\""],
                          capture_output=True, text=True, check=False,
                          env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2] / "src")))
    assert proc.returncode == 0, proc.stderr
    note, got = proc.stdout.strip().splitlines()
    if got == "256":  # could not raise it
        assert "could not take rlimit_nofile" in note and "'rlimit_nofile'" in note, note
        from hpcval.vet.healthgate import audit_bad
        audit = [{"setting": "rlimit_nofile", "status": "mismatch", "found": "256",
                  "expected": "min 1024"}]
        assert audit_bad(audit, {"rlimit_nofile"}) == []
        assert audit_bad(audit) == ["rlimit_nofile found '256', expected min 1024"]
    else:
        assert got == want, note


def test_a_quota_the_kernel_throttled_is_off_however_busy_the_node() -> None:
    """The kernel's own count (cpu.stat of the gate's cgroup chain): held back
    for its quota in every reading, the share is off even where 16 gates
    share the cores; a little throttling (the quota hardly binds) is not."""
    held = [Contention(2, 6.0, 0.24, 0.5, throttled=0.3, quota=0.25),
            Contention(2, 5.0, 0.25, 0.5, throttled=0.35, quota=0.25)]
    status, evidence = classify({}, [], held)
    assert status["cpu_share"] == "off"
    assert evidence["cpu_share"] == ("CPU share 0.24 of a CPU: held back by its cgroup's "
                                     "quota of 0.25 CPU for 60 % of the time (6.0 other "
                                     "runnable task(s) on 2 CPU(s))")
    barely = [Contention(2, 8.9, 0.23, 0.5, throttled=0.025, quota=0.25)] * 2  # measured
    assert classify({}, [], barely)[0]["cpu_share"] == "busy"


def test_the_cgroup_chain_and_its_throttling(tmp_path: Path) -> None:
    """cgroup v1 (``cpu`` controller, ns) and v2 (``cpu.max``, us), as the
    kernel writes them."""
    v1 = tmp_path / "v1"
    gate = v1 / "cpu" / "slurm" / "node3"
    gate.mkdir(parents=True)
    (v1 / "cpu" / "cpu.stat").write_text("nr_periods 0\nnr_throttled 0\nthrottled_time 0\n")
    (gate / "cpu.stat").write_text("nr_periods 223\nnr_throttled 191\n"
                                   "throttled_time 13092978971\nnr_bursts 0\nburst_time 0\n")
    (gate / "cpu.cfs_quota_us").write_text("25000\n")
    (gate / "cpu.cfs_period_us").write_text("100000\n")
    cg = tmp_path / "cgroup"
    cg.write_text("4:memory:/x\n1:cpu:/slurm/node3\n0::/\n")
    chain = healthstorm.cpu_cgroups(cg, v1)
    assert chain == [gate, v1 / "cpu" / "slurm", v1 / "cpu"]
    assert healthstorm.throttling(chain) == (pytest.approx(13.092978971), 0.25)
    v2 = tmp_path / "v2"
    job = v2 / "system.slice" / "slurmd.service"
    job.mkdir(parents=True)
    (v2 / "cpu.stat").write_text("usage_usec 10\n")
    (job / "cpu.stat").write_text("usage_usec 5\nnr_periods 10\nnr_throttled 8\n"
                                  "throttled_usec 750000\n")
    (job / "cpu.max").write_text("50000 100000\n")
    cg.write_text("0::/system.slice/slurmd.service\n")
    chain = healthstorm.cpu_cgroups(cg, v2)
    assert chain[0] == job and chain[-1] == v2
    assert healthstorm.throttling(chain) == (0.75, 0.5)
    assert healthstorm.cpu_cgroups(tmp_path / "no-such-file", v2) == []
    assert healthstorm.cpu_cgroups(cg, tmp_path / "no-cgroup-fs") == []
