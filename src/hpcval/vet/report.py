"""A vetting's results for a person (table, culprits, HTML) and a script (JSON)."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcval.vet.judge import FIGURES

ORDER = ["pingpong_bw_1MiB", "triad_bw", "shm_pingpong_bw_1MiB", "shm_pingpong_lat_8B",
         "cpu_mhz"]


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"


def node_verdicts(result: Mapping[str, Any]) -> dict[str, str]:
    verdict = result["verdict"]
    out = {n: "ok" for n in verdict["nodes"]}
    for c in verdict["culprits"]:
        for n in c["nodes"]:
            out[n] = f"NAMED ({c['kind']} {c['name']})" if c["kind"] == "switch" else "NAMED"
    for u in result.get("unmeasured", []):
        for n in u["name"].split("<->") if u["kind"] == "node" else ():
            out[n] = "UNMEASURED"
    for n, state in result.get("skipped", {}).items():
        out[n] = f"not measured (Slurm: {state})"
    return out


def text(result: Mapping[str, Any]) -> str:
    verdict = result["verdict"]
    table = verdict["table"]
    figs = [f for f in ORDER if any(f in table.get(n, {}) for n in verdict["nodes"])]
    lines = [f"hpcval vet {result['id']}: site {result['site']}, partition "
             f"{result['partition']}, {len(verdict['nodes'])} nodes, {result['rounds']} rounds"
             f" (+{result['follow_up_rounds']} follow-up), {result['jobs']} job, "
             f"{result['steps']} srun steps, {result['wall_seconds']:.0f} s", ""]
    head = f"{'node':<12}" + "".join(f"{FIGURES[f].label[:22]:>24}" for f in figs) + "  verdict"
    units = f"{'':<12}" + "".join(f"{'(' + FIGURES[f].unit + ', vs median)':>24}" for f in figs)
    lines += [head, units]
    verdicts = node_verdicts(result)
    for n in verdict["nodes"]:
        cells = []
        for f in figs:
            d = table.get(n, {}).get(f)
            cells.append(f"{'-':>24}" if d is None else
                         f"{_fmt(d['value']) + ' ' + _pct(d) + (' !' if d['low'] else ''):>24}")
        lines.append(f"{n:<12}" + "".join(cells) + f"  {verdicts[n]}")
    lines.append("")
    if verdict["culprits"]:
        lines.append("Named:")
        lines += [f"  {c['kind']:<6} {c['evidence']}" for c in verdict["culprits"]]
    elif verdict["judged"]:
        lines.append("Named: none (no node, link or switch off its partition)")
    lines += [f"Partition: {p}" for p in verdict["partition"]]
    lines += [f"Note: {n}" for n in verdict["notes"]]
    lines += [f"Failed: {f}" for f in result.get("failures", [])]
    if result.get("unmeasured"):
        lines.append(f"Unmeasured ({len(result['unmeasured'])}): the vetting is incomplete "
                     "(exit 4)")
        lines += [f"  {u['kind']:<6} {u['name']}: {u['cause']}" for u in result["unmeasured"]]
    return "\n".join(lines) + "\n"


def _pct(d: Mapping[str, Any]) -> str:
    spec_better_higher = d["worse_by"]
    return f"({-spec_better_higher * 100:+.0f}%)"


def _color(frac: float) -> str:
    """Red (0) to green (1) for a value relative to the median."""
    f = max(0.0, min(1.0, frac))
    r, g = int(220 * (1 - f) + 40 * f), int(60 * (1 - f) + 170 * f)
    return f"rgb({r},{g},70)"


def html_page(result: Mapping[str, Any]) -> str:
    verdict = result["verdict"]
    nodes = verdict["nodes"]
    pairs = verdict["pairs"]
    center = next((d["center"] for d in pairs.values()), 0.0) or 1.0
    cell = max(14, min(40, 600 // max(1, len(nodes))))
    left, top = 110, 110
    size = left + cell * len(nodes) + 20
    svg = [f'<svg width="{size}" height="{top + cell * len(nodes) + 20}" '
           'xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="11">']
    for i, n in enumerate(nodes):
        y = top + i * cell
        svg.append(f'<text x="{left - 4}" y="{y + cell * 0.65}" text-anchor="end">'
                   f'{html.escape(n)}</text>')
        x = left + i * cell + cell / 2
        svg.append(f'<text x="{x}" y="{top - 6}" transform="rotate(-60 {x} {top - 6})">'
                   f'{html.escape(n)}</text>')
    for key, d in pairs.items():
        a, b = key.split("|")
        if a not in nodes or b not in nodes:
            continue
        for r, c in ((nodes.index(a), nodes.index(b)), (nodes.index(b), nodes.index(a))):
            svg.append(f'<rect x="{left + c * cell}" y="{top + r * cell}" width="{cell - 1}" '
                       f'height="{cell - 1}" fill="{_color(d["value"] / center)}">'
                       f'<title>{html.escape(a)} - {html.escape(b)}: {d["value"]:.1f} MB/s '
                       f'({-d["worse_by"] * 100:+.0f} %)</title></rect>')
    svg.append("</svg>")
    bars = []
    verdicts = node_verdicts(result)
    for fig in ORDER:
        spec = FIGURES[fig]
        vals = {n: verdict["table"][n][fig] for n in nodes if fig in verdict["table"].get(n, {})}
        if not vals:
            continue
        top_v = max(d["value"] for d in vals.values()) or 1.0
        rows = [f"<h3>{html.escape(spec.label)} ({spec.unit}, {spec.better} is better)</h3>"
                "<table class=bars>"]
        for n, d in vals.items():
            width = int(300 * d["value"] / top_v)
            color = "#c33" if d["low"] else "#4a4"
            rows.append(f"<tr><td>{html.escape(n)}</td><td><div style='background:{color};"
                        f"width:{width}px;height:12px'></div></td><td>{_fmt(d['value'])} "
                        f"({-d['worse_by'] * 100:+.0f} % vs median {_fmt(d['center'])})</td></tr>")
        rows.append("</table>")
        bars += rows
    culprits = "".join(f"<li><b>{html.escape(c['kind'])} {html.escape(c['name'])}</b>: "
                       f"{html.escape(c['evidence'].removeprefix(c['name'] + ': '))}</li>"
                       for c in verdict["culprits"])
    notes = "".join(f"<li>{html.escape(x)}</li>" for x in verdict["partition"] + verdict["notes"]
                    + result.get("failures", []))
    summary = "".join(f"<tr><td>{html.escape(n)}</td><td>{html.escape(v)}</td></tr>"
                      for n, v in verdicts.items())
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8">
<title>hpcval vet {html.escape(result['id'])}</title>
<style>body{{font-family:sans-serif;margin:2em}} td{{padding:2px 8px}}</style></head><body>
<h1>hpcval vet: {html.escape(result['site'])} / {html.escape(result['partition'])}</h1>
<p>{html.escape(result['id'])}: {len(nodes)} nodes, {result['rounds']} rounds
(+{result['follow_up_rounds']} follow-up), {result['jobs']} job, {result['steps']} srun steps,
{result['wall_seconds']:.0f} s wall time.</p>
<h2>Named</h2><ul>{culprits or '<li>none</li>'}</ul>
<ul>{notes}</ul>
<h2>PingPong 1 MiB bandwidth per node pair (MB/s; green = partition median, red = 0)</h2>
{''.join(svg)}
<h2>Per node</h2><table>{summary}</table>
{''.join(bars)}
</body></html>
"""


def write(result: Mapping[str, Any], directory: Path) -> dict[str, Path]:
    paths = {"json": directory / "vet.json", "html": directory / "vet.html",
             "text": directory / "vet.txt"}
    paths["json"].write_text(json.dumps(result, indent=1) + "\n")
    paths["html"].write_text(html_page(result))
    paths["text"].write_text(text(result))
    return paths
