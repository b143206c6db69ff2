"""What ``hpcval vet`` prints on the terminal.

Up to :data:`TABLE_UP_TO` nodes the whole text of the vetting (one line per
node, :func:`hpcval.vet.report.text`). Above it one line per node is thousands
of lines, so the terminal gets the result instead: what was named with its
evidence, the partition's findings, what could not be measured, and one line
per figure (median, spread, the lowest and the highest node, how many flagged);
the per-node table stays in vet.txt, vet.json and vet.html.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hpcval.vet import report
from hpcval.vet.judge import FIGURES, INFORMATIONAL

#: the largest partition whose terminal text has one line per node
TABLE_UP_TO = 64
#: notes shown on the terminal above TABLE_UP_TO nodes (the rest in vet.txt)
MAX_NOTES = 20


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"


def figure_line(result: Mapping[str, Any], fig: str) -> str | None:
    """One figure over the partition's nodes: median, spread (normal-consistent
    MAD, relative to the median), the worst and the best node, how many flagged.
    None where no node has the figure."""
    spec = FIGURES[fig]
    per_node = [(n, d) for n, figs in result["verdict"]["table"].items()
                if (d := figs.get(fig)) is not None]
    if not per_node:
        return None
    values = np.array([d["value"] for _, d in per_node], dtype=float)
    med = float(np.median(values))
    mad = 1.4826 * float(np.median(np.abs(values - med)))
    spread = f"{mad / abs(med) * 100:.1f} %" if med else f"{_fmt(mad)} {spec.unit}"
    lo, hi = int(np.argmin(values)), int(np.argmax(values))
    worst, best = (lo, hi) if spec.better == "higher" else (hi, lo)
    flagged = sum(1 for _, d in per_node if d["low"])
    what = ("shown, not judged" if fig in INFORMATIONAL
            else f"{flagged} flagged" if flagged else "none flagged")
    src = "nodes' pair medians" if fig == "pingpong_bw_1MiB" else "nodes"
    return (f"  {spec.label}: {len(per_node)} {src}, median {_fmt(med)} {spec.unit}, "
            f"spread {spread}; worst {per_node[worst][0]} {_fmt(values[worst])}, "
            f"best {per_node[best][0]} {_fmt(values[best])}; {what}")


def text(result: Mapping[str, Any], table_up_to: int = TABLE_UP_TO) -> str:
    """The terminal text of a vetting (see the module's docstring)."""
    nodes = result["verdict"]["nodes"]
    if len(nodes) <= table_up_to:
        return report.text(result)
    lines = [report.head_line(result), "",
             f"Per figure ({len(nodes)} nodes; one line per node in vet.txt, vet.json, "
             "vet.html):"]
    lines += [line for fig in report.ORDER if (line := figure_line(result, fig))]
    pairs = result["verdict"].get("pairs", {})
    if pairs:
        vals = np.array([d["value"] for d in pairs.values()], dtype=float)
        low = sum(1 for d in pairs.values() if d["low"])
        lines.append(f"  {FIGURES['pingpong_bw_1MiB'].label} per pair: {len(pairs)} pairs, "
                     f"median {_fmt(float(np.median(vals)))} "
                     f"{FIGURES['pingpong_bw_1MiB'].unit}, lowest {_fmt(float(vals.min()))}; "
                     f"{low} low")
    states = list(report.node_verdicts(result).values())
    named = sum(1 for s in states if s.startswith("NAMED"))
    unmeasured = sum(1 for s in states if s == "UNMEASURED")
    not_run = sum(1 for s in states if s.startswith("not measured"))
    lines.append(f"  nodes: {len(nodes) - named - unmeasured - not_run} ok, {named} named, "
                 f"{unmeasured} unmeasured, {not_run} not measured (Slurm)")
    lines.append("")
    lines += report.result_lines(result, max_notes=MAX_NOTES)
    return "\n".join(lines) + "\n"
