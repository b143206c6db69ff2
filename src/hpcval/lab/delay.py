"""A delay on every lab link where the kernel has no ``netem``.

Shaping (:mod:`hpcval.lab.fabric`) limits rate; a real fabric also takes time
per packet. Kernels built without ``netem`` (and without ``fq``, so no
departure-time pacing from BPF either) still have netfilter's NFQUEUE: in every
node namespace an ``iptables`` rule (table ``mangle``, chain ``HPCVAL-DELAY``
from ``OUTPUT``) sends what the node sends on its lab link (``-o lab0 -d
198.18.0.0/15``) to queue 0, where ``hpcval-labdelay`` (``labdelay.c``, built
here with the system's C compiler and Debian's ``libnetfilter-queue-dev`` the
first time a lab gets a delay) holds each packet for the delay and accepts it,
in order. Each node's sends are delayed once, so a round trip between two nodes
takes twice the delay longer and IMB PingPong's latency (half a round trip)
grows by the delay.

No packet is dropped by the delay: the daemon's queue holds 65,536 packets,
``--queue-bypass`` lets traffic pass undelayed (never dropped) while no daemon
listens (``lab status`` then names the daemon as not running), a delay is
removed by deleting the rules first, waiting for the held packets to leave and
only then stopping the daemon, which accepts what it still holds on SIGTERM;
the kernel's drop counters and the daemon's are shown by ``lab status``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

from hpcval.lab.layout import BENCH_NET, NODE_IFACE, LabLayout, LabNode
from hpcval.lab.state import LabState
from hpcval.lab.system import LabError, pid_alive, pid_executable, run, stop_pid

DAEMON = "hpcval-labdelay"
SOURCE = Path(__file__).with_name("labdelay.c")
CHAIN = "HPCVAL-DELAY"
QUEUE = 0
#: the longest delay taken: 1 s (a fabric's delay is microseconds; this is a lab)
MAX_DELAY_US = 1_000_000
HEADER = Path("/usr/include/libnetfilter_queue/libnetfilter_queue.h")
PACKAGES = "gcc libnetfilter-queue-dev iptables"
#: iptables front ends, in the order tried: the nftables one (its NFQUEUE target
#: runs as an xtables target inside nftables, as kernels without nft_queue need),
#: then the legacy one
IPTABLES = ("iptables-nft", "iptables-legacy", "iptables")

_DELAY = re.compile(r"^(\d+(?:\.\d+)?)(us|ms|s)$")
_UNIT_US = {"us": 1, "ms": 1_000, "s": 1_000_000}


def parse_delay(text: str) -> int:
    """A delay such as ``50us``, ``0.2ms`` or ``0`` (none), in whole microseconds."""
    value = text.strip().lower()
    if value in ("0", "none", "off"):
        return 0
    match = _DELAY.match(value)
    if not match:
        raise LabError(f"delay '{text}': a time with its unit, such as 50us or 0.2ms "
                       "(0 or none: no delay)")
    us = round(float(match.group(1)) * _UNIT_US[match.group(2)])
    if not 0 <= us <= MAX_DELAY_US:
        raise LabError(f"delay '{text}': at most {MAX_DELAY_US // 1000} ms")
    if us == 0 and float(match.group(1)) > 0:
        raise LabError(f"delay '{text}': at least 1us")
    return us


def delay_text(us: int) -> str:
    """``50us``, ``2ms``: the name a delay is shown and recorded by (``none`` for 0)."""
    if us <= 0:
        return "none"
    return f"{us // 1000}ms" if us % 1000 == 0 else f"{us}us"


def daemon_key(node: LabNode) -> str:
    return f"labdelay-{node.name}"


def _iptables() -> list[str]:
    """The iptables programs installed, in the order :data:`IPTABLES` tries them."""
    found = [name for name in IPTABLES if shutil.which(name)]
    if not found:
        raise LabError(f"no iptables program for the delay rules (install with: apt-get "
                       f"install {PACKAGES})")
    return found


def add_rules(netns: str, programs: list[str]) -> str:
    """Add the delay rules in ``netns`` with the first of ``programs`` the kernel
    takes them from; returns that program."""
    errors = []
    for program in programs:
        procs = [run(cmd, netns=netns, check=False) for cmd in rule_commands(program, add=True)]
        if all(p.returncode == 0 for p in procs):
            return program
        errors.append(f"{program}: {next(p.stderr.strip() for p in procs if p.returncode)}")
        for cmd in rule_commands(program, add=False):
            run(cmd, netns=netns, check=False)
    raise LabError(f"the kernel takes no NFQUEUE rule in {netns} ({'; '.join(errors)}): it "
                   "needs CONFIG_NETFILTER_XT_TARGET_NFQUEUE and CONFIG_NETFILTER_NETLINK_QUEUE")


def build(dest_dir: Path) -> Path:
    """``hpcval-labdelay`` compiled from :data:`SOURCE` into ``dest_dir`` (again
    only when the source is newer than the program there)."""
    binary = dest_dir / DAEMON
    if binary.exists() and binary.stat().st_mtime >= SOURCE.stat().st_mtime:
        return binary
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or not HEADER.exists():
        missing = "a C compiler" if cc is None else str(HEADER)
        raise LabError(f"the delay daemon needs {missing} (install with: apt-get install "
                       f"{PACKAGES})")
    dest_dir.mkdir(parents=True, exist_ok=True)
    tmp = dest_dir / f".{DAEMON}.tmp"
    run([cc, "-O2", "-Wall", "-o", str(tmp), str(SOURCE), "-lnetfilter_queue", "-lnfnetlink"],
        timeout=120)
    tmp.replace(binary)
    return binary


def rule_commands(iptables: str, add: bool) -> list[list[str]]:
    """The ``iptables`` commands that add (or remove) a node's delay rules."""
    base = [iptables, "-w", "-t", "mangle"]
    if not add:
        return [[*base, "-D", "OUTPUT", "-j", CHAIN], [*base, "-F", CHAIN],
                [*base, "-X", CHAIN]]
    return [[*base, "-N", CHAIN],
            [*base, "-A", CHAIN, "-o", NODE_IFACE, "-d", str(BENCH_NET), "-j", "NFQUEUE",
             "--queue-num", str(QUEUE), "--queue-bypass"],
            [*base, "-A", "OUTPUT", "-j", CHAIN]]


def stats_file(layout: LabLayout, node: LabNode) -> Path:
    return layout.state_dir / "delay" / f"{node.name}.stats"


def read_stats(path: Path) -> dict[str, str]:
    """The daemon's statistics (``key value`` lines), empty if there are none."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split(" ", 1) for line in lines if " " in line)


def _wait_ready(proc: subprocess.Popen, stats: Path, log: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if read_stats(stats).get("ready") == "1":
            return
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
    raise LabError(f"{DAEMON} did not start (exit {proc.poll()}): {' | '.join(tail) or log}")


def start(layout: LabLayout, state: LabState, us: int) -> None:
    """Delay every packet each node (and the file server) sends on its lab link
    by ``us`` microseconds. A delay already there is removed first."""
    stop(layout, state)
    if us <= 0:
        return
    programs = _iptables()
    binary = build(layout.state_dir / "delay")
    state.delay = {"us": us, "iptables": programs[0]}
    state.save(layout.state_file)
    try:
        for node in layout.shaped_nodes:
            stats = stats_file(layout, node)
            stats.unlink(missing_ok=True)
            log = layout.log_dir / f"{DAEMON}-{node.name}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("ab") as out:
                proc = subprocess.Popen(
                    ["ip", "netns", "exec", node.netns, str(binary), str(QUEUE), str(us),
                     str(stats)],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
            state.daemons[daemon_key(node)] = {"pid": proc.pid, "exe": DAEMON}
            state.save(layout.state_file)
            _wait_ready(proc, stats, log)
            program = add_rules(node.netns, programs)
            programs = [program]  # every node the same way, so that one removes them all
            state.delay["iptables"] = program
            state.save(layout.state_file)
    except BaseException:
        stop(layout, state)
        raise


def stop(layout: LabLayout, state: LabState) -> None:
    """Remove the delay: rules first, then (once what they held has left) the daemons."""
    keys = [k for k in state.daemons if k.startswith("labdelay-")]
    if not state.delay and not keys:
        return
    iptables = str(state.delay.get("iptables") or "") or _iptables()[0]
    for node in layout.shaped_nodes:
        for cmd in rule_commands(iptables, add=False):
            run(cmd, netns=node.netns, check=False)
    time.sleep(int(state.delay.get("us") or 0) / 1e6 + 0.05)
    for key in keys:
        info = state.daemons.pop(key)
        stop_pid(int(info["pid"]), str(info["exe"]))
    state.delay = {}
    state.save(layout.state_file)


def kernel_drops(netns: str) -> int | None:
    """Packets the kernel dropped on the delay's queue in ``netns`` (queue full,
    or no room on the daemon's socket), or None where the queue is not bound."""
    proc = run(["cat", "/proc/net/netfilter/nfnetlink_queue"], netns=netns, check=False)
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 7 and fields[0] == str(QUEUE):
            return int(fields[5]) + int(fields[6])
    return None


def node_status(layout: LabLayout, state: LabState, node: LabNode) -> tuple[str, list[str]]:
    """One line on ``node``'s delay (packets held, how late they left, drops) and
    the problems found: daemon not running, rules missing, packets dropped."""
    problems: list[str] = []
    info = state.daemons.get(daemon_key(node))
    if not info or not pid_alive(int(info["pid"])) or \
            pid_executable(int(info["pid"])) != DAEMON:
        problems.append(f"{node.name}: no delay daemon runs: its packets pass undelayed "
                        "('hpcval lab fabric --delay ...' starts it again)")
    iptables = str(state.delay.get("iptables") or "iptables")
    rule = run([iptables, "-w", "-t", "mangle", "-C", "OUTPUT", "-j", CHAIN], netns=node.netns,
               check=False)
    if rule.returncode != 0:
        problems.append(f"{node.name}: the delay rules are missing: its packets pass undelayed")
    stats = read_stats(stats_file(layout, node))
    packets = int(stats.get("packets", 0))
    late = int(stats.get("late_sum_ns", 0)) / max(packets, 1) / 1000
    dropped = (kernel_drops(node.netns) or 0) + int(stats.get("overruns", 0))
    if dropped:
        problems.append(f"{node.name}: {dropped} packet(s) dropped at the delay queue")
    text = (f"{packets:,} packets held, at most {int(stats.get('held_max', 0)):,} at once, "
            f"left {late:.1f} us late on average (at most "
            f"{int(stats.get('late_max_ns', 0)) / 1000:,.0f} us), {dropped} dropped, "
            f"scheduling {stats.get('sched', '?')}")
    return text, problems
