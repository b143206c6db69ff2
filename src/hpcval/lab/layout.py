"""Names, addresses and paths of a lab: pure data, no side effects."""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from pathlib import Path

#: The benchmarking range (RFC 2544); the lab never uses addresses outside it.
BENCH_NET = ipaddress.ip_network("198.18.0.0/15")
MAX_NODES = 200

BRIDGE = "hvlab0"
#: Interface name inside every node namespace, so one FI_TCP_IFACE fits all nodes.
NODE_IFACE = "lab0"
#: Comment that marks every line the lab adds to a system file.
MARKER = "# hpcval-lab"


#: The file server: its own network namespace and link, not a Slurm node.
FILE_SERVER_NAME = "lab-fs"
FILE_SERVER_NETNS = "hpcval-lab-fs"
FILE_SERVER_VETH = "hvlab-fs"


def default_state_dir() -> Path:
    return Path(os.environ.get("HPCVAL_LAB_STATE", "/run/hpcval-lab"))


def shared_dir(state_dir: Path | None = None) -> Path:
    """Mount point of the file server's directory, the same path on every compute node."""
    return (state_dir or default_state_dir()) / "shared"


@dataclass(frozen=True)
class LabNode:
    index: int
    name: str
    netns: str
    address: str
    host_veth: str


@dataclass(frozen=True)
class LabLayout:
    """Everything derived from the number of nodes and the state directory."""

    nodes_count: int
    state_dir: Path
    subnet: str = "198.18.0.0/24"
    controller_host: str = ""
    #: Add a service node ``lab-svc`` (partition ``service``, 1 CPU) for jobs
    #: that drive others, like a scheduled validation run.
    service: bool = False
    #: The lab has a file server (``lab-fs``), whose link is shaped like the nodes'.
    file_server_enabled: bool = False

    def __post_init__(self) -> None:
        net = ipaddress.ip_network(self.subnet)
        if not net.subnet_of(BENCH_NET):  # type: ignore[arg-type]
            raise ValueError(f"lab subnet {self.subnet} is outside {BENCH_NET}")
        if not 1 <= self.nodes_count <= MAX_NODES:
            raise ValueError(f"--nodes must be between 1 and {MAX_NODES}")
        if not self.controller_host:
            object.__setattr__(self, "controller_host", socket.gethostname())

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.subnet)

    @property
    def bridge_address(self) -> str:
        return str(self.network.network_address + 1)

    @property
    def prefixlen(self) -> int:
        return self.network.prefixlen

    def node(self, index: int) -> LabNode:
        return LabNode(
            index=index,
            name=f"lab-n{index}",
            netns=f"hpcval-lab-n{index}",
            address=str(self.network.network_address + 10 + index),
            host_veth=f"hvlab-n{index}",
        )

    @property
    def nodes(self) -> list[LabNode]:
        """The compute nodes (partition ``lab``)."""
        return [self.node(i) for i in range(1, self.nodes_count + 1)]

    @property
    def service_node(self) -> LabNode | None:
        if not self.service:
            return None
        return LabNode(index=0, name="lab-svc", netns="hpcval-lab-n0",
                       address=str(self.network.network_address + 10), host_veth="hvlab-n0")

    @property
    def all_nodes(self) -> list[LabNode]:
        """Compute nodes and, if there is one, the service node."""
        svc = self.service_node
        return self.nodes + ([svc] if svc else [])

    @property
    def file_server(self) -> LabNode:
        """The file server ``lab-fs``: not a Slurm node, only sshd serving
        :attr:`export_dir` to the compute nodes over the lab bridge."""
        return LabNode(index=-1, name=FILE_SERVER_NAME, netns=FILE_SERVER_NETNS,
                       address=str(self.network.network_address + 9),
                       host_veth=FILE_SERVER_VETH)

    @property
    def shaped_nodes(self) -> list[LabNode]:
        """Nodes whose links a fabric profile shapes: compute nodes and file server."""
        return self.nodes + ([self.file_server] if self.file_server_enabled else [])

    @property
    def nodelist(self) -> str:
        return f"lab-n[1-{self.nodes_count}]" if self.nodes_count > 1 else "lab-n1"

    # files under the state directory
    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def munge_dir(self) -> Path:
        return self.state_dir / "munge"

    @property
    def munge_socket(self) -> Path:
        return self.munge_dir / "munge.socket.2"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "log"

    @property
    def fs_dir(self) -> Path:
        """sshd configuration, keys and PID file of the file server."""
        return self.state_dir / "fileserver"

    @property
    def export_dir(self) -> Path:
        """The directory the file server serves (on this machine's disk)."""
        return self.fs_dir / "export"

    @property
    def shared_dir(self) -> Path:
        """Where every compute node mounts the file server's directory."""
        return shared_dir(self.state_dir)
