"""Fabric profiles: bandwidth shaping of the lab links with ``tc``.

Each node's link is shaped in both directions with a token-bucket filter
(``tbf``): on the interface inside the node namespace (what the node sends) and
on the bridge port in the root namespace (what the node receives), like a
full-duplex NIC of the profile's rate. ``unshaped`` removes the shaping, so the
links run at whatever the kernel's veth path gives (memory-copy speed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hpcval.lab.layout import NODE_IFACE, LabLayout
from hpcval.lab.system import LabError, run


@dataclass(frozen=True)
class FabricProfile:
    name: str
    #: line rate in bit/s; None means no shaping
    rate_bps: int | None
    description: str

    def tbf_args(self) -> list[str]:
        """``tc qdisc ... tbf`` arguments for this rate.

        The bucket holds 1/8 ms of traffic but at least 64 KiB (one GSO
        segment), so even a 64 KiB message cannot slip through at memory speed
        on a 1 Gbit/s link; the queue holds 50 ms, enough for TCP not to see
        drops as loss at these rates.
        """
        assert self.rate_bps is not None
        rate_bytes = self.rate_bps // 8
        burst = max(rate_bytes // 8000, 64 * 1024)
        return ["tbf", "rate", f"{self.rate_bps}bit", "burst", str(burst), "latency", "50ms"]


PROFILES: dict[str, FabricProfile] = {
    p.name: p
    for p in (
        FabricProfile("unshaped", None, "no shaping: veth at memory-copy speed"),
        FabricProfile("25g", 25_000_000_000, "25 Gbit/s per node link, each direction"),
        FabricProfile("10g", 10_000_000_000, "10 Gbit/s per node link, each direction"),
        FabricProfile("1g", 1_000_000_000, "1 Gbit/s per node link (1 GbE), each direction"),
        FabricProfile("100m", 100_000_000, "100 Mbit/s per node link, each direction"),
        FabricProfile("70m", 70_000_000,
                      "70 Mbit/s per node link, each direction (30 % below 100m)"),
    )
}


#: A rate given directly in Mbit/s, e.g. ``185m``.
RATE_NAME = re.compile(r"^(\d+(?:\.\d+)?)m$")


def get_profile(name: str) -> FabricProfile:
    """Profile ``name``, or a profile made from a rate in Mbit/s such as ``185m``
    (bench/detection.sh steps the link rate down by a few per cent)."""
    if name in PROFILES:
        return PROFILES[name]
    match = RATE_NAME.match(name)
    if match and float(match.group(1)) > 0:
        rate = int(float(match.group(1)) * 1_000_000)
        return FabricProfile(name, rate, f"{rate / 1e6:g} Mbit/s per node link, each direction")
    raise LabError(
        f"unknown fabric profile '{name}' (known: {', '.join(PROFILES)}, "
        "or a rate in Mbit/s such as 185m)"
    )


def apply_profile(layout: LabLayout, name: str, node: str | None = None) -> FabricProfile:
    """Shape (or unshape) every node link of ``layout`` to profile ``name`` (the
    file server's too: at ``1g`` it serves all nodes through one 1 Gbit/s link),
    or only the link of compute node ``node`` (e.g. ``lab-n3``: one slow NIC)."""
    profile = get_profile(name)
    targets = layout.shaped_nodes
    if node is not None:
        targets = [n for n in layout.nodes if n.name == node]
        if not targets:
            raise LabError(f"no lab node '{node}' (nodes: "
                           f"{', '.join(n.name for n in layout.nodes)})")
    for target in targets:
        for dev, netns in ((NODE_IFACE, target.netns), (target.host_veth, None)):
            if profile.rate_bps is None:
                # deleting a qdisc that is not there fails; that is the goal state
                run(["tc", "qdisc", "del", "dev", dev, "root"], netns=netns, check=False)
            else:
                run(
                    ["tc", "qdisc", "replace", "dev", dev, "root", *profile.tbf_args()],
                    netns=netns,
                )
    return profile


#: the rate that stands for "unshaped" where a class needs one (htb has no "none")
UNSHAPED_BPS = 100_000_000_000


def shape_pair(layout: LabLayout, a: str, b: str, name: str, base: dict[str, str]) -> FabricProfile:
    """Shape only the traffic between compute nodes ``a`` and ``b`` to profile
    ``name`` (one slow cable or path between two nodes whose NICs are fine): on
    each end, what it sends goes through an ``htb`` with two classes, the traffic
    to the other end at the profile's rate and everything else at the end's own
    profile (``base``: node -> profile name). What a node receives stays shaped
    on its bridge port as before. Applying a node or fabric profile afterwards
    replaces it."""
    profile = get_profile(name)
    ends = {n.name: n for n in layout.nodes if n.name in (a, b)}
    if a == b or len(ends) != 2:
        raise LabError(f"--link {a},{b}: two different lab nodes, e.g. lab-n2,lab-n5 (nodes: "
                       f"{', '.join(n.name for n in layout.nodes)})")
    for src, dst in ((ends[a], ends[b]), (ends[b], ends[a])):
        own = get_profile(base.get(src.name, "unshaped")).rate_bps or UNSHAPED_BPS
        slow = profile.rate_bps or UNSHAPED_BPS
        dev, ns = NODE_IFACE, src.netns
        run(["tc", "qdisc", "del", "dev", dev, "root"], netns=ns, check=False)
        run(["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10"],
            netns=ns)
        for cls, rate in (("1:10", own), ("1:20", slow)):
            run(["tc", "class", "add", "dev", dev, "parent", "1:", "classid", cls, "htb",
                 "rate", f"{rate}bit", "ceil", f"{rate}bit"], netns=ns)
        run(["tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
             "u32", "match", "ip", "dst", f"{dst.address}/32", "flowid", "1:20"], netns=ns)
    return profile


def link_qdisc(dev: str, netns: str | None = None) -> str:
    """The root qdisc of ``dev`` as ``tc`` prints it (for status)."""
    proc = run(["tc", "qdisc", "show", "dev", dev, "root"], netns=netns, check=False)
    return proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else "?"
