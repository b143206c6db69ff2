"""The gate's drain path (hpcval.vet.healthdrain): its reason, whose drain a
reason is, the share rule and the drain-then-check of gates that drain at the
same moment. The Slurm output is real: ``scontrol show node --oneliner`` and
``sinfo -R`` captured on a 16-node lab (tests/data/vet/slurm/) with lab-n5
drained by an administrator ("admin: disk"), lab-n6 and lab-n7 with reasons of
600 and 3,000 characters in the gate's format, lab-n8 with quotes, ``=`` and
``;`` in its evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.vet import healthdrain
from hpcval.vet.healthdrain import (
    CODES,
    ShareRule,
    SlurmNode,
    allowed,
    make_reason,
    parse_nodes,
    parse_reason,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "vet" / "slurm"
#: 2026-11-28T12:00:30Z, half a minute after the captured gate stamps
NOW = 1795867230.0


def captured() -> dict[str, SlurmNode]:
    return parse_nodes((DATA / "show-node-drained.txt").read_text())


def test_the_captured_nodes_read_whole() -> None:
    nodes = captured()
    assert sorted(nodes, key=lambda n: int(n[5:])) == [f"lab-n{i}" for i in range(1, 17)]
    assert nodes["lab-n1"].state == "IDLE" and not nodes["lab-n1"].drained
    assert nodes["lab-n1"].reason == "" and nodes["lab-n1"].partitions == ["lab"]
    admin = nodes["lab-n5"]
    assert admin.drained and admin.reason == "admin: disk" and admin.user == "root"
    # Slurm kept the 3,004-character reason whole; Slurm's [user@time] is not part of it
    long = nodes["lab-n7"]
    assert len(long.reason) == 3004 and long.reason.endswith(" END")


def test_sinfo_shows_the_same_reasons_as_scontrol() -> None:
    nodes = captured()
    for line in (DATA / "sinfo-R.txt").read_text().splitlines():
        name, state, reason, _when = line.split("|")
        assert state == "drained" and nodes[name].reason == reason


def test_only_the_gates_own_reason_is_its_own() -> None:
    nodes = captured()
    assert nodes["lab-n5"].own is None  # an administrator's: never touched
    own = nodes["lab-n8"].own
    assert own is not None and own.codes == ("HC-SHMBW", "HC-TRIAD")
    assert own.stamp == "2026-11-28T12:00:01.250Z"
    assert own.evidence == "a; b = c (x); 'q' \"dq\" 1,234 MB/s"
    for foreign in ("hpcval health: triad 4,686 MB/s",  # the format before codes and time
                    "hpcval vet 20261123T204709Z-83d8e4: lab-n3: PingPong 1 MiB 12.3 MB/s",
                    "admin: hpcval health [HC-TRIAD] 2026-11-28T12:00:01.250Z: x",
                    "hpcval health [HC-TRIAD] 2026-11-28T12:00:01Z: no milliseconds",
                    "Not responding", ""):
        assert parse_reason(foreign) is None, foreign
    # a reason on a node that is not drained is nobody's drain
    assert SlurmNode("x", "IDLE", ["lab"], own_reason(), "root").own is None


def test_on_the_captured_partition_three_gate_drains_refuse_a_fourth() -> None:
    """lab-n6, lab-n7, lab-n8 carry the gate's reason (12:00:00-12:00:01),
    lab-n5 an administrator's: three gate drains in the window of a 16-node
    partition, where one is allowed; an hour later none counts."""
    nodes = captured()
    assert healthdrain.recent(nodes.values(), "lab", NOW, 3600) == [
        (NOW - 30, "lab-n6"), (NOW - 30, "lab-n7"), (NOW - 28.75, "lab-n8")]
    why = ShareRule().why_not("lab-n1", nodes, "lab", NOW)
    assert why.startswith("hpcval drained 3 of the 16 nodes of partition lab in the last 3600 s "
                          "(lab-n6, lab-n7, lab-n8); at most 1")
    assert ShareRule().why_not("lab-n1", nodes, "lab", NOW + 3600) == ""
    assert ShareRule(0.25).why_not("lab-n1", nodes, "lab", NOW) == ""  # 4 of 16 allowed


def own_reason(now: float = NOW - 10) -> str:
    return make_reason({"cpu_share": "CPU share 0.24 of a CPU"}, now)


def test_the_reason_is_one_line_with_codes_time_and_evidence() -> None:
    reason = make_reason({"triad_bw": "triad 3,000 MB/s\n(best of 3)",
                          "cpu_share": "CPU share 0.24 of a CPU"}, NOW)
    assert reason == ("hpcval health [HC-CPUSHARE,HC-TRIAD] 2026-11-28T12:00:30.000Z: "
                      "CPU share 0.24 of a CPU; triad 3,000 MB/s (best of 3)")
    own = parse_reason(reason)
    assert own is not None and own.at == NOW
    assert set(CODES) == {"triad_bw", "shm_pingpong_bw_1MiB", "cpu_mhz", "dgemm_gflops",
                          "cpu_share", "tuning"}


@pytest.mark.parametrize("nodes,share,expected", [
    (16, 0.05, 1),   # 0.8 nodes: one may always be drained
    (19, 0.05, 1), (20, 0.05, 1), (39, 0.05, 1), (40, 0.05, 2),
    (1000, 0.05, 50), (4, 0.5, 2), (3, 0.01, 1),
])
def test_the_share_rule_allows_floor_of_the_share_and_at_least_one(
        nodes: int, share: float, expected: int) -> None:
    assert allowed(nodes, share) == expected


def partition(drained: dict[str, float], size: int = 16,
              extra: dict[str, str] | None = None) -> dict[str, SlurmNode]:
    """A partition of ``size`` nodes, ``drained`` by the gate at the given times."""
    out = {}
    for i in range(1, size + 1):
        name = f"lab-n{i}"
        if name in drained:
            out[name] = SlurmNode(name, "IDLE+DRAIN", ["lab"], own_reason(drained[name]))
        elif extra and name in extra:
            out[name] = SlurmNode(name, "IDLE+DRAIN", ["lab"], extra[name])
        else:
            out[name] = SlurmNode(name, "IDLE", ["lab"])
    return out


def test_a_gate_drain_in_the_window_uses_up_a_16_node_partition() -> None:
    rule = ShareRule(0.05, 3600)
    assert rule.why_not("lab-n3", partition({}), "lab", NOW) == ""
    why = rule.why_not("lab-n3", partition({"lab-n9": NOW - 600}), "lab", NOW)
    assert why.startswith("hpcval drained 1 of the 16 nodes of partition lab in the last "
                          "3600 s (lab-n9); at most 1 (5 %, at least 1)")
    # an older drain, an administrator's, another partition's: not counted
    assert rule.why_not("lab-n3", partition({"lab-n9": NOW - 4000}), "lab", NOW) == ""
    assert rule.why_not("lab-n3", partition({}, extra={"lab-n9": "admin: disk"}), "lab",
                        NOW) == ""
    other = partition({"lab-n9": NOW - 600})
    other["lab-n9"].partitions = ["gpu"]
    assert rule.why_not("lab-n3", other, "lab", NOW) == ""


def test_gates_that_drain_together_keep_the_first_by_time_then_name() -> None:
    """Seven gates of a 16-node partition drained within a second: each reads
    the same seven drains back and only the first keeps its drain."""
    rule = ShareRule(0.05, 3600)
    times = {f"lab-n{i}": NOW - 1 + 0.1 * (i % 3) for i in (2, 4, 6, 8, 10, 12, 14)}
    state = partition(times)
    keep = [n for n in times if rule.why_not(n, state, "lab", NOW, mine="x") == ""]
    assert keep == ["lab-n6"]  # 6 % 3 == 0: the earliest stamp (lab-n12 has the same; n6 < n12)
    state40 = partition(times, size=40)
    keep40 = sorted(n for n in times if rule.why_not(n, state40, "lab", NOW, mine="x") == "")
    assert keep40 == ["lab-n12", "lab-n6"]


class FakeSlurm:
    """Slurm's node table as scontrol would show it, for :func:`healthdrain.act`
    (the real scontrol runs in tests/lab/test_vet_health_lab.py)."""

    def __init__(self, nodes: dict[str, SlurmNode], racing: dict[str, float] | None = None):
        self.nodes, self.racing, self.calls = nodes, racing or {}, []

    def read(self) -> dict[str, SlurmNode]:
        return {k: SlurmNode(v.name, v.state, list(v.partitions), v.reason, v.user)
                for k, v in self.nodes.items()}

    def drain(self, node: str, reason: str) -> None:
        self.calls.append(("drain", node))
        self.nodes[node].state, self.nodes[node].reason = "IDLE+DRAIN", reason
        for other, at in self.racing.items():  # other gates drain meanwhile
            self.nodes[other].state, self.nodes[other].reason = "IDLE+DRAIN", own_reason(at)

    def resume(self, node: str) -> None:
        self.calls.append(("resume", node))
        self.nodes[node].state, self.nodes[node].reason = "IDLE", ""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    slurm = FakeSlurm(partition({}, extra={"lab-n5": "admin: disk"}))
    monkeypatch.setattr(healthdrain, "drain", slurm.drain)
    monkeypatch.setattr(healthdrain.vslurm, "resume", slurm.resume)
    return slurm


def act(fake: FakeSlurm, node: str, ok: bool) -> str:
    return healthdrain.act(node, "lab", {} if ok else {"cpu_share": "CPU share 0.2"}, ok,
                           ShareRule(), now=lambda: NOW, sleep=lambda _s: None,
                           nodes=fake.read)


def test_an_admins_drain_is_never_resumed_nor_drained_again(fake: FakeSlurm) -> None:
    assert act(fake, "lab-n5", ok=True) == "left drained: drained by someone else ('admin: disk')"
    assert act(fake, "lab-n5", ok=False).startswith("not drained again: drained by someone")
    assert fake.calls == [] and fake.nodes["lab-n5"].reason == "admin: disk"


def test_the_gate_drains_and_later_resumes_its_own(fake: FakeSlurm) -> None:
    assert act(fake, "lab-n3", ok=False) == "drained [HC-CPUSHARE]"
    assert fake.nodes["lab-n3"].reason.startswith("hpcval health [HC-CPUSHARE] 2026-11-28T")
    assert act(fake, "lab-n3", ok=False).startswith("already drained by hpcval health at ")
    assert act(fake, "lab-n3", ok=True).startswith("resumed (drained by hpcval health at ")
    assert fake.calls == [("drain", "lab-n3"), ("resume", "lab-n3")]
    assert act(fake, "lab-n3", ok=True) == ""  # healthy and in service: nothing to do


def test_a_second_gate_in_the_window_refuses_and_says_why(fake: FakeSlurm) -> None:
    assert act(fake, "lab-n3", ok=False) == "drained [HC-CPUSHARE]"
    line = act(fake, "lab-n4", ok=False)
    assert line.startswith("NOT drained: hpcval drained 1 of the 16 nodes") and "lab-n3" in line
    assert fake.calls == [("drain", "lab-n3")]


def test_a_gate_that_lost_the_race_undoes_only_its_own_drain(fake: FakeSlurm) -> None:
    fake.racing = {"lab-n9": NOW - 5}  # another gate's drain, stamped earlier, lands meanwhile
    line = act(fake, "lab-n3", ok=False)
    assert line.startswith("NOT drained (undone after 2 s): hpcval drained 1 of the 16")
    assert fake.calls == [("drain", "lab-n3"), ("resume", "lab-n3")]
    assert fake.nodes["lab-n9"].drained and fake.nodes["lab-n5"].reason == "admin: disk"


def test_a_drain_slurm_did_not_take_is_said(fake: FakeSlurm,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(healthdrain, "drain", lambda node, reason: None)  # lost on the way
    assert act(fake, "lab-n3", ok=False) == "drain requested, but Slurm shows IDLE '' after 2 s"
