"""The lab's link delay, the pieces that need neither root nor a lab: the delay
names, the rules, the daemon's statistics, and the daemon built from its source
where the C compiler and libnetfilter-queue-dev are installed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hpcval.lab import delay
from hpcval.lab.state import LabState
from hpcval.lab.system import LabError


@pytest.mark.parametrize(("text", "us"), [("50us", 50), ("0.2ms", 200), ("1ms", 1000),
                                          ("0", 0), ("none", 0), ("1s", 1_000_000),
                                          ("12.5us", 12)])
def test_delays_are_times_with_a_unit(text: str, us: int) -> None:
    assert delay.parse_delay(text) == us


@pytest.mark.parametrize("text", ["50", "5xs", "-1us", "2s", "0.1us", ""])
def test_a_delay_without_a_unit_or_out_of_range_is_refused(text: str) -> None:
    with pytest.raises(LabError, match="delay"):
        delay.parse_delay(text)


def test_delay_names() -> None:
    assert [delay.delay_text(u) for u in (0, 50, 1500, 2000)] == ["none", "50us", "1500us", "2ms"]


def test_rules_queue_only_lab_traffic_on_the_lab_link_and_bypass_without_a_daemon() -> None:
    add = delay.rule_commands("iptables-nft", add=True)
    queue = next(c for c in add if "NFQUEUE" in c)
    assert queue[queue.index("-o") + 1] == "lab0"
    assert queue[queue.index("-d") + 1] == "198.18.0.0/15"
    assert "--queue-bypass" in queue  # no daemon: packets pass, never dropped
    assert add[-1][-4:] == ["-A", "OUTPUT", "-j", delay.CHAIN]
    remove = delay.rule_commands("iptables-nft", add=False)
    assert remove[0][-4:] == ["-D", "OUTPUT", "-j", delay.CHAIN]
    assert [c[-2] for c in remove[1:]] == ["-F", "-X"]


def test_stats_file(tmp_path: Path) -> None:
    path = tmp_path / "lab-n1.stats"
    assert delay.read_stats(path) == {}
    path.write_text("ready 1\npackets 12\nsched fifo\n")
    assert delay.read_stats(path) == {"ready": "1", "packets": "12", "sched": "fifo"}


def test_state_keeps_the_delay(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    LabState(nodes=2, delay={"us": 50, "iptables": "iptables-nft"}).save(path)
    loaded = LabState.load(path)
    assert loaded is not None and loaded.delay == {"us": 50, "iptables": "iptables-nft"}


@pytest.mark.skipif(not delay.HEADER.exists(), reason=f"apt-get install {delay.PACKAGES}")
def test_the_daemon_builds_and_refuses_bad_arguments(tmp_path: Path) -> None:
    binary = delay.build(tmp_path)
    assert binary.name == delay.DAEMON and binary.stat().st_mode & 0o111
    assert delay.build(tmp_path) == binary  # built once
    for args in ([], ["0", "50"], ["x", "50", "s"], ["0", "-5", "s"], ["0", "99999999", "s"]):
        proc = subprocess.run([str(binary), *args], capture_output=True, text=True)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith(("usage", "hpcval-labdelay:")), proc.stderr
