"""A delay on the lab's links (``hpcval lab fabric --delay``) on a real 2-node lab:
round trips between the nodes grow by twice the delay (each node's sends are held
once), a TCP stream through the delay arrives whole and in order with nothing
dropped at the delay's queue, ``lab status`` shows it, removing it (a profile
without ``--delay``) stops the daemons and removes the rules, ``lab down`` leaves
no daemon behind;
and nothing reshapes a lab while a Slurm job runs on it (exit 3 naming the job).

The round trip is a UDP echo between the node namespaces (200 small datagrams;
its minimum, which a loaded machine moves least). Needs root, Slurm, munge, the
C compiler, libnetfilter-queue-dev and iptables; skips with the reason otherwise.
About 15 s.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcval.core.paths import project_root
from hpcval.lab import cluster
from hpcval.lab import delay as delay_mod
from hpcval.lab.layout import default_state_dir
from hpcval.lab.state import LabState
from hpcval.lab.system import pid_alive

from .conftest import lab_missing_reason

pytestmark = pytest.mark.lab

HPCVAL = [sys.executable, "-m", "hpcval.cli"]
N1, N2 = "hpcval-lab-n1", "hpcval-lab-n2"
A2 = "198.18.0.12"

ECHO = """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("198.18.0.12", 5599))
while True:
    data, peer = s.recvfrom(64)
    s.sendto(data, peer)
"""

PROBE = """
import socket, statistics, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
rtts = []
for i in range(200):
    t = time.perf_counter_ns()
    s.sendto(b"x" * 8, ("198.18.0.12", 5599))
    s.recvfrom(64)
    rtts.append((time.perf_counter_ns() - t) / 1000)
print(min(rtts), statistics.median(rtts))
"""

SINK = """
import socket
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("198.18.0.12", 5600)); srv.listen(1)
c, _ = srv.accept(); n = 0
while True:
    b = c.recv(1 << 20)
    if not b: break
    n += len(b)
print(n)
"""

SOURCE = """
import socket, time
for _ in range(50):
    try:
        s = socket.create_connection(("198.18.0.12", 5600), timeout=5); break
    except OSError:
        time.sleep(0.1)
buf = b"\\0" * (1 << 20)
for _ in range(32):
    s.sendall(buf)
s.close()
"""


def _netns_py(ns: str, code: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", code],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _rtt_us() -> tuple[float, float]:
    """Minimum and median UDP round trip lab-n1 -> lab-n2 -> lab-n1, in us."""
    proc = _netns_py(N1, PROBE)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    low, median = out.split()
    return float(low), float(median)


def _counters(ns: str) -> dict[str, int]:
    """TCP counters of a namespace (nstat, absolute values)."""
    out = subprocess.run(["ip", "netns", "exec", ns, "nstat", "-az"], capture_output=True,
                         text=True, check=True).stdout
    return {f[0]: int(f[1]) for f in (line.split() for line in out.splitlines()[1:]) if
            len(f) >= 2 and f[1].isdigit()}


def _daemon_pids() -> list[int]:
    """Delay daemons running (not zombies: this process started them and has not
    reaped them)."""
    pids = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == delay_mod.DAEMON:
                pids.append(int(comm.parent.name))
        except OSError:
            pass
    return [pid for pid in pids if pid_alive(pid)]


@pytest.fixture(scope="module")
def lab() -> Iterator[None]:
    reason = lab_missing_reason()
    if reason is None and not delay_mod.HEADER.exists():
        reason = f"{delay_mod.HEADER} missing (apt-get install {delay_mod.PACKAGES})"
    if reason is None and not any(
            subprocess.run(["sh", "-c", f"command -v {p}"], capture_output=True).returncode == 0
            for p in delay_mod.IPTABLES):
        reason = f"no iptables (apt-get install {delay_mod.PACKAGES})"
    if reason:
        pytest.skip(reason)
    cluster.up(2, log=lambda *_: None, file_server=False)
    echo = _netns_py(N2, ECHO)
    try:
        yield
    finally:
        echo.kill()
        echo.wait()
        cluster.down(log=lambda *_: None)
        assert not _daemon_pids(), "a delay daemon outlived 'lab down'"


def test_delay_adds_to_every_round_trip_and_goes_again(lab: None) -> None:
    before_low, _ = _rtt_us()
    cluster.set_delay(500)
    state = LabState.load(default_state_dir() / "state.json")
    assert state is not None and state.delay["us"] == 500
    assert len(_daemon_pids()) == 2
    low, median = _rtt_us()
    # each node holds what it sends for 500 us: a round trip crosses two nodes' sends
    assert low - before_low >= 900, (before_low, low, median)

    # a TCP stream through the delay: all of it arrives, nothing out of order (the
    # sender's retransmission count is no test: its tail-loss probes resend a segment
    # whose ACK is late on a loaded machine, with or without a delay)
    ofo0 = _counters(N2).get("TcpExtTCPOFOQueue", 0)
    sink = _netns_py(N2, SINK)
    time.sleep(0.3)
    source = _netns_py(N1, SOURCE)
    assert source.wait(timeout=120) == 0, source.stderr.read() if source.stderr else ""
    out, err = sink.communicate(timeout=60)
    assert int(out) == 32 << 20, err
    assert _counters(N2).get("TcpExtTCPOFOQueue", 0) == ofo0
    time.sleep(1.5)  # the daemons write their figures five times a second at most

    st = cluster.status()
    assert st.delay == "500us" and not st.problems, st.problems
    for node in ("lab-n1", "lab-n2"):
        text = st.delay_nodes[node]
        held = re.match(r"([\d,]+) packets held", text)
        assert held and int(held[1].replace(",", "")) > 100 and " 0 dropped" in text, text
    shown = subprocess.run([*HPCVAL, "lab", "status"], capture_output=True, text=True,
                           cwd=project_root(), check=False).stdout
    assert "delay 500us on every link" in shown, shown

    # a whole-lab profile without --delay removes it: rules, daemons, the added time
    cluster.set_fabric("unshaped")
    assert not _daemon_pids()
    for ns in (N1, N2):
        rules = subprocess.run(["ip", "netns", "exec", ns, state.delay["iptables"], "-w", "-t",
                                "mangle", "-S"], capture_output=True, text=True).stdout
        assert delay_mod.CHAIN not in rules, rules
    after_low, _ = _rtt_us()
    assert low - after_low >= 900, (low, after_low)
    assert cluster.status().delay == "none"


def test_nothing_reshapes_the_lab_while_a_job_runs(lab: None) -> None:
    job = subprocess.run(["sbatch", "--parsable", "-N", "1", "-J", "hpcval-guard-test",
                          "-o", "/dev/null", "--wrap", "sleep 120"],
                         capture_output=True, text=True, check=True)
    job_id = job.stdout.strip().split(";")[0]
    try:
        for _ in range(100):
            state = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"],
                                   capture_output=True, text=True).stdout.strip()
            if state == "RUNNING":
                break
            time.sleep(0.2)
        assert state == "RUNNING"
        env = {**os.environ, "HPCVAL_VAR": str(default_state_dir() / "guard-var")}
        proc = subprocess.run([*HPCVAL, "lab", "fabric", "1g", "--delay", "50us"], env=env,
                              capture_output=True, text=True, cwd=project_root(), check=False)
        assert proc.returncode == 3, proc.stdout + proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and f"Slurm job {job_id} (hpcval-guard-test" in lines[0], lines
        assert cluster.current_fabric() == "unshaped" and cluster.current_delay() == "none"
        # --force reshapes all the same, saying whom it disturbs
        proc = subprocess.run([*HPCVAL, "lab", "fabric", "--delay", "50us", "--force"],
                              env=env, capture_output=True, text=True, cwd=project_root(),
                              check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"Slurm job {job_id}" in proc.stdout and cluster.current_delay() == "50us"
    finally:
        subprocess.run(["scancel", job_id], check=False)
        cluster.set_delay(0)
