"""The lab's state file: what has been created, written as it is created."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class LabState:
    nodes: int = 0
    service: bool = False
    subnet: str = ""
    fabric: str = "unshaped"
    #: compute node -> profile of its own link where it differs from ``fabric``
    node_fabric: dict[str, str] = field(default_factory=dict)
    #: ``a<->b`` -> profile of the traffic between nodes a and b (one slow link)
    link_fabric: dict[str, str] = field(default_factory=dict)
    #: the delay on every link (``lab fabric --delay``): {"us": int, "iptables": program};
    #: empty without one
    delay: dict[str, object] = field(default_factory=dict)
    #: daemon name -> {"pid": int, "exe": str}
    daemons: dict[str, dict[str, object]] = field(default_factory=dict)
    netns: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    #: system file -> lines added to it (removed again by ``down``)
    added_lines: dict[str, list[str]] = field(default_factory=dict)
    #: files created outside the state directory (removed by ``down``)
    created_files: list[str] = field(default_factory=list)
    #: the file server (empty if the lab has none): address, export, mount,
    #: sshd PID, per node {"pid": sshfs PID, "ns_pid": PID whose mounts it is in}
    fileserver: dict[str, object] = field(default_factory=dict)
    #: every compute node has its own view of /proc and /sys files (``up --node-views``)
    node_views: bool = False
    ready: bool = False

    @classmethod
    def load(cls, path: Path) -> LabState | None:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            # a torn write of a half-failed run: treat as empty, down sweeps by name
            return cls()
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)
