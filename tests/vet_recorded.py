"""The recorded lab vettings of tests/data/vet as `hpcval vet` stores them
(vet.json): the yardstick the gate's tests judge against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "vet"
RECORDED = ["all-healthy", "one-bad-node", "one-bad-link", "slow-30pct"]


def stored(scale: float = 1.0) -> list[dict[str, Any]]:
    """The recorded lab runs as `hpcval vet` stores them (vet.json), oldest first;
    every per-node sample times ``scale``."""
    from hpcval.vet.run import judge_recorded

    out = []
    for i, name in enumerate(RECORDED):
        data = json.loads((DATA / f"{name}.json").read_text())
        for fig in data["node_samples"].values():
            for node, samples in fig.items():
                fig[node] = [scale * x for x in samples]
        out.append({"id": f"2026112{i}T000000Z-00000{i}", "site": "lab", "partition": "lab",
                    "verdict": judge_recorded(data).to_dict(),
                    "node_samples": data["node_samples"]})
    return out
