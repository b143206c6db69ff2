"""Network namespaces, bridge, veth links and /etc/hosts entries of the lab."""

from __future__ import annotations

from pathlib import Path

from hpcval.lab.layout import BRIDGE, MARKER, NODE_IFACE, LabLayout, LabNode
from hpcval.lab.state import LabState
from hpcval.lab.system import run

HOSTS = Path("/etc/hosts")


def create_bridge(layout: LabLayout, state: LabState) -> None:
    run(["ip", "link", "add", BRIDGE, "type", "bridge"])
    state.links.append(BRIDGE)
    state.save(layout.state_file)
    run(["ip", "addr", "add", f"{layout.bridge_address}/{layout.prefixlen}", "dev", BRIDGE])
    run(["ip", "link", "set", BRIDGE, "up"])


def create_node(layout: LabLayout, node: LabNode, state: LabState) -> None:
    run(["ip", "netns", "add", node.netns])
    state.netns.append(node.netns)
    state.save(layout.state_file)
    run(["ip", "link", "add", node.host_veth, "type", "veth",
         "peer", "name", NODE_IFACE, "netns", node.netns])
    state.links.append(node.host_veth)
    state.save(layout.state_file)
    run(["ip", "link", "set", node.host_veth, "master", BRIDGE])
    run(["ip", "link", "set", node.host_veth, "up"])
    run(["ip", "link", "set", "lo", "up"], netns=node.netns)
    run(["ip", "addr", "add", f"{node.address}/{layout.prefixlen}", "dev", NODE_IFACE],
        netns=node.netns)
    run(["ip", "link", "set", NODE_IFACE, "up"], netns=node.netns)


def add_hosts_lines(layout: LabLayout, state: LabState, hosts: Path = HOSTS) -> None:
    """Let every node (and the root namespace) resolve the node names."""
    lines = [f"{n.address} {n.name} {MARKER}" for n in layout.all_nodes]
    state.added_lines.setdefault(str(hosts), []).extend(lines)
    state.save(layout.state_file)
    text = hosts.read_text() if hosts.exists() else ""
    if text and not text.endswith("\n"):
        text += "\n"
    hosts.write_text(text + "".join(line + "\n" for line in lines))


def remove_added_lines(path: Path, lines: list[str]) -> int:
    """Remove ``lines`` and any other line carrying the lab marker from ``path``."""
    if not path.exists():
        return 0
    wanted = set(lines)
    kept, removed = [], 0
    for line in path.read_text().splitlines(keepends=True):
        bare = line.rstrip("\n")
        if bare in wanted or bare.endswith(MARKER):
            removed += 1
        else:
            kept.append(line)
    if removed:
        path.write_text("".join(kept))
    return removed


def existing_netns() -> list[str]:
    proc = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def existing_links() -> list[str]:
    proc = run(["ip", "-o", "link", "show"], check=False)
    names = []
    for line in proc.stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names


def netns_pids(netns: str) -> list[int]:
    proc = run(["ip", "netns", "pids", netns], check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def link_bytes(dev: str, netns: str | None = None) -> tuple[int, int]:
    """(rx_bytes, tx_bytes) of ``dev``."""
    if netns is None:
        base = Path("/sys/class/net") / dev / "statistics"
        try:
            return int((base / "rx_bytes").read_text()), int((base / "tx_bytes").read_text())
        except OSError:
            return (0, 0)
    proc = run(["cat", f"/sys/class/net/{dev}/statistics/rx_bytes",
                f"/sys/class/net/{dev}/statistics/tx_bytes"], netns=netns, check=False)
    vals = proc.stdout.split()
    return (int(vals[0]), int(vals[1])) if len(vals) == 2 else (0, 0)
