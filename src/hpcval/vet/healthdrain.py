"""What the per-node gate does to Slurm: drain its own node, refuse in a storm,
resume only what it drained itself.

Every gate runs on its own node; gates of different nodes share no disk. What
hpcval drained, and when, is read back from Slurm: the drain reason carries
hpcval's marker, the finding's codes and a UTC time stamp (milliseconds),

    hpcval health [HC-CPUSHARE] 2026-11-28T12:40:01.123Z: <evidence>

one line, never cut (Slurm 22.05 keeps a 3,000-character reason whole,
measured on the lab; docs/vet.md). ``scontrol show node --oneliner`` shows it
as ``Reason=<reason> [<user>@<time>]``, the last field.

- **Ownership.** A reason that does not parse as the gate's own is someone
  else's (an administrator's, ``hpcval vet``'s, Slurm's): the gate never
  resumes such a node, never drains it again, never rewrites its reason.
- **Share rule.** At most ``allowed(N, share)`` nodes of an N-node partition
  may carry the gate's drain with a time stamp inside the window:
  ``max(1, floor(share * N))`` (one node may always be drained, so the gate
  works on a 16-node partition at 5 %, where 5 % is 0.8 nodes). Past it the
  gate prints why and does not drain.
- **Gates that drain at the same moment.** Each gate reads the count, drains,
  waits ``settle`` seconds (every drain requested meanwhile has reached
  slurmctld) and reads again: the gate drains are ranked by (time stamp, node
  name), the same order for every gate, and a gate ranked past the allowed
  number resumes its own node again and says so.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone

from hpcval.core.errors import EnvironmentFault
from hpcval.vet import slurm as vslurm
from hpcval.vet.findings import FIGURE_CODES

MARK = "hpcval health"
#: finding -> the code its drain reason carries
#: (hpcval.vet.findings: the one registry of codes, dgemm_gflops's HC-DGEMM among them)
CODES = {f: FIGURE_CODES[f] for f in ("triad_bw", "shm_pingpong_bw_1MiB", "cpu_mhz",
                                      "dgemm_gflops", "cpu_share", "tuning")}
_CODE = r"HC-[A-Z]+(?:-[A-Z]+)*"  # hpcval.vet.findings.CODES
REASON = re.compile(rf"^hpcval health \[(?P<codes>{_CODE}(?:,{_CODE})*)\] "
                    r"(?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z): (?P<evidence>.+)$")
#: ``Reason=<text> [<user>@<time>]`` at the end of a ``scontrol show node --oneliner`` line
_REASON_FIELD = re.compile(r" Reason=(?P<reason>.*?)(?: \[(?P<user>[^@\]\s]*)@(?P<at>[^\]]*)\])?$")


@dataclass
class SlurmNode:
    name: str
    state: str
    partitions: list[str]
    #: the drain reason without Slurm's ``[user@time]`` suffix ("" without one)
    reason: str = ""
    user: str = ""

    @property
    def drained(self) -> bool:
        """DRAIN set (IDLE+DRAIN: drained; MIXED+DRAIN or ALLOCATED+DRAIN: draining)."""
        return "DRAIN" in self.state.split("+")

    @property
    def own(self) -> OwnDrain | None:
        return parse_reason(self.reason) if self.drained else None


@dataclass(frozen=True)
class OwnDrain:
    codes: tuple[str, ...]
    stamp: str
    evidence: str

    @property
    def at(self) -> float:
        return datetime.strptime(self.stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=timezone.utc).timestamp()


def stamp(now: float) -> str:
    t = datetime.fromtimestamp(now, timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def make_reason(findings: dict[str, str], now: float) -> str:
    """One line: marker, codes, time stamp, the evidence of every finding."""
    # a finding is a figure (its code from CODES) or a finding code itself
    codes = ",".join(sorted({CODES.get(f, f) for f in findings}))
    text = "; ".join(findings[f] for f in sorted(findings, key=lambda f: CODES.get(f, f)))
    text = " ".join(text.split())  # one line, whatever the evidence holds
    return f"{MARK} [{codes}] {stamp(now)}: {text}"


def parse_reason(reason: str) -> OwnDrain | None:
    m = REASON.match(reason)
    if not m:
        return None
    return OwnDrain(tuple(m["codes"].split(",")), m["stamp"], m["evidence"])


def parse_nodes(text: str) -> dict[str, SlurmNode]:
    """``scontrol show node --oneliner`` -> node name -> :class:`SlurmNode`."""
    out: dict[str, SlurmNode] = {}
    for line in text.splitlines():
        head = line.split(" Reason=", 1)[0]
        fields = dict(re.findall(r"(\w+)=(\S*)", head))
        if "NodeName" not in fields:
            continue
        node = SlurmNode(fields["NodeName"], fields.get("State", "?"),
                         [p for p in fields.get("Partitions", "").split(",") if p])
        m = _REASON_FIELD.search(line.rstrip())
        if m:
            node.reason, node.user = m["reason"], m["user"] or ""
        out[node.name] = node
    return out


def read_nodes() -> dict[str, SlurmNode]:
    proc = vslurm._run([vslurm._require("scontrol"), "show", "node", "--oneliner"])
    if proc.returncode != 0:
        raise EnvironmentFault(f"scontrol show node: {proc.stderr.strip()} (exit 3)")
    return parse_nodes(proc.stdout)


drain = vslurm.drain  # the reason whole, on one line


def allowed(nodes: int, share: float) -> int:
    """Gate drains a partition of ``nodes`` may carry within the window."""
    return max(1, math.floor(share * nodes + 1e-9))


def recent(nodes: Iterable[SlurmNode], partition: str, now: float,
           window: float) -> list[tuple[float, str]]:
    """(time, node) of the partition's nodes drained by the gate within the
    window, oldest first (ties by name)."""
    out = []
    for n in nodes:
        own = n.own
        if own and partition in n.partitions and now - window <= own.at <= now + 60:
            out.append((own.at, n.name))
    return sorted(out, key=lambda d: (d[0], vslurm._natural(d[1])))


@dataclass
class ShareRule:
    share: float = 0.05
    window: float = 3600.0
    settle: float = 2.0

    def why_not(self, node: str, nodes: dict[str, SlurmNode], partition: str,
                now: float, mine: str | None = None) -> str:
        """Empty when ``node`` may carry the gate's drain; else why not. With
        ``mine`` (the node's own drain stamp) the node's drain is ranked among
        the others of the window."""
        size = sum(1 for n in nodes.values() if partition in n.partitions)
        limit = allowed(size, self.share)
        drains = recent(nodes.values(), partition, now, self.window)
        if mine is not None:
            names = [d[1] for d in drains]
            rank = names.index(node) if node in names else 0
            if rank < limit:
                return ""
            ahead = [d[1] for d in drains[:rank]]
        else:
            if len(drains) < limit:
                return ""
            ahead = [d[1] for d in drains]
        return (f"hpcval drained {len(ahead)} of the {size} nodes of partition {partition} "
                f"in the last {self.window:.0f} s ({', '.join(ahead)}); at most "
                f"{limit} ({self.share * 100:g} %, at least 1) may be: a storm is not "
                "drained (raise --drain-share or resume them first)")


def act(node: str, partition: str, findings: dict[str, str], ok: bool, rule: ShareRule,
        now: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
        nodes: Callable[[], dict[str, SlurmNode]] = read_nodes) -> str:
    """Drain ``node`` for ``findings`` (or, ``ok``, resume it if the gate drained
    it); the sentence that says what was done."""
    state = nodes()
    me = state.get(node)
    if me is None:
        return f"not drained: Slurm does not know node {node}"
    own = me.own
    if ok:
        if own:
            vslurm.resume(node)
            return f"resumed (drained by hpcval health at {own.stamp})"
        if me.drained:
            return f"left drained: drained by someone else ({me.reason!r})"
        return ""
    if me.drained:
        if own:
            return f"already drained by hpcval health at {own.stamp}"
        return f"not drained again: drained by someone else ({me.reason!r}), left alone"
    why = rule.why_not(node, state, partition, now())
    if why:
        return f"NOT drained: {why}"
    reason = make_reason(findings, now())
    mine = parse_reason(reason)
    assert mine is not None
    drain(node, reason)
    sleep(rule.settle)
    state = nodes()
    after = state.get(node)
    if after is None or after.own != mine:
        return (f"drain requested, but Slurm shows {after.state if after else 'no node'} "
                f"{after.reason if after else ''!r} after {rule.settle:.0f} s")
    why = rule.why_not(node, state, partition, now(), mine=mine.stamp)
    if why:  # still our drain (checked above): undo it, nothing else
        vslurm.resume(node)
        return f"NOT drained (undone after {rule.settle:.0f} s): {why}"
    return f"drained [{','.join(mine.codes)}]"
