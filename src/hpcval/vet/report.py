"""A vetting's results for a person (table, culprits, HTML) and a script (JSON)."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcval.core.fileio import atomic_write
from hpcval.vet.findings import CODES
from hpcval.vet.judge import FIGURES

ORDER = ["pingpong_bw_1MiB", "triad_bw", "shm_pingpong_bw_1MiB", "shm_pingpong_lat_8B",
         "cpu_mhz", "dgemm_gflops"]


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


def head_line(result: Mapping[str, Any]) -> str:
    """The first line of a vetting's text: which partition, how big, how long."""
    return (f"hpcval vet {result['id']}: site {result['site']}, partition "
            f"{result['partition']}, {len(result['verdict']['nodes'])} nodes, "
            f"{result['rounds']} rounds (+{result['follow_up_rounds']} follow-up"
            + (f", +{result['again_rounds']} again without a lost node"
               if result.get("again_rounds") else "") + "), "
            f"{result['jobs']} job, {result['steps']} srun steps, "
            f"{result['wall_seconds']:.0f} s")


def text(result: Mapping[str, Any]) -> str:
    """The whole text of a vetting (vet.txt): one line per node, then the result."""
    verdict = result["verdict"]
    table = verdict["table"]
    figs = [f for f in ORDER if any(f in table.get(n, {}) for n in verdict["nodes"])]
    lines = [head_line(result), ""]
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
    return "\n".join(lines + result_lines(result)) + "\n"


def result_lines(result: Mapping[str, Any], max_notes: int | None = None) -> list[str]:
    """What was named (with its evidence), the partition's findings, the notes
    (the first ``max_notes`` of them, with how many more), failures and what
    could not be measured."""
    verdict = result["verdict"]
    lines: list[str] = []
    if verdict["culprits"]:
        lines.append("Named:")
        lines += [f"  {c['kind']:<6} {_coded(c)}" for c in verdict["culprits"]]
    elif verdict["judged"]:
        lines.append("Named: none (no node, link or switch off its partition)")
    lines += [f"Partition: {p}" for p in verdict["partition"]]
    notes = verdict["notes"]
    shown = notes if max_notes is None else notes[:max_notes]
    lines += [f"Note: {n}" for n in shown]
    if len(shown) < len(notes):
        lines.append(f"Note: ... {len(notes) - len(shown)} more notes in vet.txt")
    lines += [f"Failed: {f}" for f in result.get("failures", [])]
    if result.get("unmeasured"):
        lines.append(f"Unmeasured ({len(result['unmeasured'])}): the vetting is incomplete "
                     "(exit 4)")
        lines += [f"  {u['kind']:<6} {u['name']}: {u['cause']}" for u in result["unmeasured"]]
        lines.append(f"  [HC-LOST] remedy: {CODES['HC-LOST'].remedy}")
    return lines


def _coded(c: Mapping[str, Any]) -> str:
    """A culprit's evidence with its code, severity and remedy (where coded)."""
    ev = str(c["evidence"])
    code = c.get("code")
    if not code:
        return ev
    if not ev.startswith(f"[{code}]"):
        ev = f"[{code}] {ev}"
    sev = c.get("severity", "off")
    return f"{ev} ({sev}; remedy: {c.get('remedy', '')})"


def _pct(d: Mapping[str, Any]) -> str:
    spec_better_higher = d["worse_by"]
    return f"({-spec_better_higher * 100:+.0f}%)"


def _color(frac: float) -> str:
    """Red (0) to green (1) for a value relative to the median."""
    f = max(0.0, min(1.0, frac))
    r, g = int(220 * (1 - f) + 40 * f), int(60 * (1 - f) + 170 * f)
    return f"rgb({r},{g},70)"


#: Up to this many nodes the page shows the node x node heat map of pair bandwidth.
HEATMAP_NODES = 64
#: Culprits listed on the first screen; the rest one click away.
FIRST_SCREEN = 12

_PAGE_CSS_VET = """
.dist{display:flex;flex-wrap:wrap;gap:1em}
.named{color:#b00020;font-weight:bold}.inswitch{color:#6a3d9a;font-weight:bold}
details.all>summary{cursor:pointer;margin:.6em 0}
"""

#: Marks: named on this figure, in a named switch, named for another reason.
_RED, _PURPLE, _GREY = "#d62728", "#6a3d9a", "#999"


def html_page(result: Mapping[str, Any]) -> str:
    """A page a person reads at thousands of nodes. First screen: the result and
    the culprits with their evidence. Then each per-node figure of the whole
    partition as one distribution (histogram) with the culprits marked, the
    pairs' distribution, a per-switch view where Slurm's topology is known, and
    every node's figures one click away (parsed only when opened)."""
    from hpcval.reporting.htmlreport import PAGE_CSS, PAGE_JS  # the validation report's style

    esc = html.escape
    verdict = result["verdict"]
    nodes = verdict["nodes"]
    culprits = verdict["culprits"]
    cls, line = _banner(result)
    facts = [f"{len(nodes):,} nodes", f"{len(verdict['pairs']):,} pairs",
             f"{result['rounds']} rounds (+{result['follow_up_rounds']} follow-up)",
             f"{result['jobs']} job", f"{result['steps']:,} Slurm steps",
             f"{result['wall_seconds']:.0f} s wall time"]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<title>hpcval vet {esc(cls)} {esc(result['id'])}</title>",
        f"<style>{PAGE_CSS}{_PAGE_CSS_VET}</style></head><body>",
        f"<h1>hpcval vet: {esc(result['site'])} / {esc(result['partition'])}</h1>",
        f"<p class='banner {cls}' id='verdict'>{esc(line)}</p>",
        f"<p class='facts'>{esc(result['id'])} · " + " · ".join(esc(f) for f in facts) + "</p>",
        "<section id='attention'><h2>Named</h2>",
    ]
    if culprits:
        items = [f"<li><b>{esc(c['kind'])} {esc(c['name'])}</b>: {esc(_evidence(c))}"
                 + (f" <code>{esc(c['code'])}</code> {esc(c.get('severity', 'off'))}"
                    f"<br><i>remedy:</i> {esc(c.get('remedy', ''))}" if c.get("code") else "")
                 + "</li>" for c in culprits]
        parts.append("<ul class='attn'>" + "".join(items[:FIRST_SCREEN]) + "</ul>")
        if len(items) > FIRST_SCREEN:
            parts.append(f"<details class='all'><summary>{len(items) - FIRST_SCREEN} more "
                         "named</summary><ul class='attn'>" + "".join(items[FIRST_SCREEN:])
                         + "</ul></details>")
    else:
        parts.append("<p>" + ("No node, link or switch is off its partition."
                              if verdict["judged"] else "Nothing could be judged.") + "</p>")
    notes = ([f"Not measured: {u['kind']} {u['name']}: {u['cause']}"
              for u in result.get("unmeasured", [])]
             + verdict["partition"] + verdict["notes"] + list(result.get("failures", [])))
    if notes:
        shown = notes[:FIRST_SCREEN]
        parts.append("<ul class='attn'>" + "".join(f"<li>{esc(x)}</li>" for x in shown)
                     + "</ul>")
        if len(notes) > len(shown):
            parts.append(f"<details class='all'><summary>{len(notes) - len(shown)} more "
                         "notes</summary><ul class='attn'>"
                         + "".join(f"<li>{esc(x)}</li>" for x in notes[len(shown):])
                         + "</ul></details>")
    parts.append("</section>")
    marks = _marks(result)
    panels = []
    for fig in ORDER:
        vals = {n: d for n in nodes if (d := verdict["table"].get(n, {}).get(fig))}
        if vals:
            panels.append(_histogram(FIGURES[fig], vals, marks, fig, per="node"))
    pair_vals = {k.replace("|", "<->"): d for k, d in verdict["pairs"].items()}
    if pair_vals:
        panels.append(_histogram(FIGURES["pingpong_bw_1MiB"], pair_vals, marks,
                                 "pingpong_bw_1MiB", per="pair"))
    parts.append("<section id='distribution'><h2>The partition, figure by figure</h2>"
                 "<p class='facts'>Each figure of every node (and every measured pair) as "
                 "one histogram; marked: <span class='named'>named</span> on that figure, "
                 "<span class='inswitch'>in a named switch</span>; dashed: the partition "
                 "median and the smallest deviation that may name a node.</p>"
                 "<div class='dist'>" + "".join(panels) + "</div></section>")
    topo = result.get("topology") or {}
    if topo:
        parts.append(_switch_view(result, topo, marks))
    if 0 < len(nodes) <= HEATMAP_NODES:
        parts.append(_heatmap(result))
    parts.append(_node_table(result, marks))
    parts.append(f"<script>{PAGE_JS}</script></body></html>\n")
    return "\n".join(parts)


def _evidence(c: Mapping[str, Any]) -> str:
    """A culprit's evidence without the name it starts with (shown beside it)."""
    ev = str(c["evidence"])
    for prefix in (f"{c['kind']} {c['name']}: ", f"{c['name']}: "):
        ev = ev.removeprefix(prefix)
    return ev


def _banner(result: Mapping[str, Any]) -> tuple[str, str]:
    """The result in one line, and its class (the validation report's)."""
    verdict = result["verdict"]
    n = len(verdict["nodes"])
    kinds: dict[str, list[str]] = {}
    for c in verdict["culprits"]:
        kinds.setdefault(c["kind"], []).append(c["name"])
    unmeasured = len(result.get("unmeasured", []))
    tail = f"; {unmeasured} not measured" if unmeasured else ""
    if kinds:
        said = []
        for kind, names in kinds.items():
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3
                                            else "")
            said.append(f"{len(names)} {kind}{'s' if len(names) > 1 else ''} ({shown})")
        return "FAIL", f"Named: {'; '.join(said)}, among {n:,} nodes{tail}"
    if not verdict["judged"]:
        return "warn", f"Not judged: {n} nodes are too few to judge against each other{tail}"
    return "PASS", f"Nothing named: {n:,} nodes judged against each other{tail}"


def _marks(result: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """node or link -> (colour, the figure it was named on): red for a named node
    or link, purple for a node of a named switch."""
    out: dict[str, tuple[str, str]] = {}
    for c in result["verdict"]["culprits"]:
        if c["kind"] == "switch":
            for n in c["nodes"]:
                out.setdefault(n, (_PURPLE, c["figure"]))
        elif c["kind"] in ("node", "link"):
            out[c["name"]] = (_RED, c["figure"])
    return out


def _histogram(spec: Any, vals: Mapping[str, Mapping[str, Any]],
               marks: Mapping[str, tuple[str, str]], fig: str, per: str) -> str:
    """One figure over the partition: counts per bin (a square-root axis, so a
    bin of one node still shows next to a bin of a thousand), the culprits as
    marks under the axis with their names, the median and the smallest
    deviation that may name."""
    esc = html.escape
    width, height, left, right, top, bottom = 620, 250, 48, 26, 28, 78
    values = [d["value"] for d in vals.values()]
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12 * max(1.0, abs(hi)):
        lo, hi = lo - 1, hi + 1
    pad = (hi - lo) * 0.03
    lo, hi = lo - pad, hi + pad
    bins = 60
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / (hi - lo) * bins))] += 1
    peak = max(counts)
    pw, ph = width - left - right, height - top - bottom

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * pw

    def y(c: float) -> float:
        return top + ph - (c / peak) ** 0.5 * ph

    label = f"{spec.label} per {per} ({spec.unit}, {spec.better} is better)"
    svg = [f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {height}' "
           f"width='{width}' height='{height}' font-family='sans-serif' font-size='11' "
           f"role='img' aria-label='{esc(label)}'>",
           f"<text x='{width / 2}' y='16' text-anchor='middle'>{esc(label)}</text>",
           f"<rect x='{left}' y='{top}' width='{pw}' height='{ph}' fill='none' "
           "stroke='#444'/>"]
    bw = pw / bins
    for i, c in enumerate(counts):
        if c:
            svg.append(f"<rect x='{left + i * bw:.1f}' y='{y(c):.1f}' width='{bw - 0.5:.1f}' "
                       f"height='{top + ph - y(c):.1f}' fill='#4a7ab0'><title>{c} {per}s, "
                       f"{_fmt(lo + i * (hi - lo) / bins)}-{_fmt(lo + (i + 1) * (hi - lo) / bins)}"
                       f"</title></rect>")
    for c in sorted({0, peak, max(1, round(peak / 4))}):
        svg.append(f"<text x='{left - 4}' y='{y(c) + 4:.1f}' text-anchor='end'>{c}</text>")
    for t in range(5):
        v = lo + (hi - lo) * t / 4
        svg.append(f"<text x='{x(v):.1f}' y='{top + ph + 14}' text-anchor='middle'>"
                   f"{_fmt(v)}</text>")
    center = next(iter(vals.values()))["center"]
    for v, what in ((center, "median"),
                    (center * (1 - spec.min_effect) if spec.better == "higher"
                     else center * (1 + spec.min_effect), f"{spec.min_effect:.0%} worse")):
        if lo <= v <= hi:
            svg.append(f"<line x1='{x(v):.1f}' x2='{x(v):.1f}' y1='{top}' y2='{top + ph}' "
                       f"stroke='#333' stroke-dasharray='4 3'><title>{esc(what)} "
                       f"{_fmt(v)}</title></line>")
    marked = sorted(((k, d["value"], marks[k][0]) for k, d in vals.items()
                     if k in marks and marks[k][1] == fig), key=lambda m: m[1])
    in_switch = sum(1 for m in marked if m[2] == _PURPLE)
    named = [m for m in marked if m[2] != _PURPLE]
    for k, v, colour in marked:
        svg.append(f"<path d='M{x(v):.1f} {top + ph + 18} l-5 9 h10 z' fill='{colour}'>"
                   f"<title>{esc(k)}: {_fmt(v)} {esc(spec.unit)}</title></path>")
    # names of the named (not each node of a named switch), staggered in rows
    for i, (k, v, _) in enumerate(named[:8]):
        anchor = "start" if x(v) < left + pw / 2 else "end"
        svg.append(f"<text x='{x(v):.1f}' y='{top + ph + 40 + 12 * (i % 3)}' "
                   f"text-anchor='{anchor}' fill='{_RED}'>{esc(k)}</text>")
    if in_switch:
        svg.append(f"<text x='{left + pw}' y='{height - 4}' text-anchor='end' "
                   f"fill='{_PURPLE}'>{in_switch} in a named switch</text>")
    svg.append("</svg>")
    caption = (f"{len(values):,} {per}s; median {_fmt(center)} {esc(spec.unit)}; "
               f"{len(named)} named" + (f", {in_switch} in a named switch" if in_switch else ""))
    return (f"<figure id='dist-{esc(fig)}-{per}'>{''.join(svg)}<figcaption>{caption}"
            "</figcaption></figure>")


def _switch_view(result: Mapping[str, Any], topo: Mapping[str, str],
                 marks: Mapping[str, tuple[str, str]]) -> str:
    """Per leaf switch (Slurm's topology): the spread of its nodes' PingPong
    figures (box: middle half, whiskers: all), its named nodes as dots, a named
    switch in red; then a table of the named and the five lowest switches."""
    esc = html.escape
    verdict = result["verdict"]
    fig = "pingpong_bw_1MiB"
    spec = FIGURES[fig]
    per: dict[str, list[tuple[str, float]]] = {}
    for n in verdict["nodes"]:
        d = verdict["table"].get(n, {}).get(fig)
        if d and n in topo:
            per.setdefault(topo[n], []).append((n, d["value"]))
    if not per:
        return ""
    bad = {c["name"] for c in verdict["culprits"] if c["kind"] == "switch"}
    names = sorted(per)
    stats = {}
    for sw in names:
        v = sorted(x for _, x in per[sw])
        q = lambda f, v=v: v[min(len(v) - 1, int(f * (len(v) - 1) + 0.5))]  # noqa: E731
        stats[sw] = (v[0], q(0.25), q(0.5), q(0.75), v[-1])
    lo = min(s[0] for s in stats.values())
    hi = max(s[4] for s in stats.values())
    if hi - lo <= 1e-12 * max(1.0, abs(hi)):
        lo, hi = lo - 1, hi + 1
    width, height, left, right, top, bottom = 1000, 260, 56, 12, 28, 44
    pw, ph = width - left - right, height - top - bottom
    step = pw / len(names)

    def y(v: float) -> float:
        return top + ph - (v - lo) / (hi - lo) * ph

    title = f"{spec.label} per node, by leaf switch ({spec.unit}; {len(names)} switches)"
    svg = [f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {height}' "
           f"width='{width}' height='{height}' font-family='sans-serif' font-size='11' "
           f"role='img' aria-label='{esc(title)}'>",
           f"<text x='{width / 2}' y='16' text-anchor='middle'>{esc(title)}</text>",
           f"<rect x='{left}' y='{top}' width='{pw}' height='{ph}' fill='none' stroke='#444'/>"]
    for t in range(5):
        v = lo + (hi - lo) * t / 4
        svg.append(f"<text x='{left - 4}' y='{y(v) + 4:.1f}' text-anchor='end'>{_fmt(v)}"
                   "</text>")
    every = max(1, len(names) // 16)
    for i, sw in enumerate(names):
        mn, q1, md, q3, mx = stats[sw]
        cx = left + (i + 0.5) * step
        colour = _RED if sw in bad else "#4a7ab0"
        bw = max(1.0, step * 0.6)
        if sw in bad:  # a band the height of the plot: a named switch is seen at once
            svg.append(f"<rect x='{cx - max(3.0, step) / 2:.1f}' y='{top}' "
                       f"width='{max(3.0, step):.1f}' height='{ph}' fill='#fbe3e6'/>")
        svg.append(f"<g><title>{esc(sw)}: {len(per[sw])} nodes, median {_fmt(md)}, "
                   f"{_fmt(mn)}-{_fmt(mx)} {esc(spec.unit)}</title>"
                   f"<line x1='{cx:.1f}' x2='{cx:.1f}' y1='{y(mx):.1f}' y2='{y(mn):.1f}' "
                   f"stroke='{colour}'/><rect x='{cx - bw / 2:.1f}' y='{y(q3):.1f}' "
                   f"width='{bw:.1f}' height='{max(1.0, y(q1) - y(q3)):.1f}' "
                   f"fill='{colour}'/></g>")
        for n, v in per[sw]:
            if n in marks and marks[n][0] == _RED:
                svg.append(f"<circle cx='{cx:.1f}' cy='{y(v):.1f}' r='4' fill='{_RED}' "
                           f"stroke='#fff'><title>{esc(n)}: {_fmt(v)} {esc(spec.unit)}"
                           "</title></circle>")
        if i % every == 0 or sw in bad:
            svg.append(f"<text x='{cx:.1f}' y='{top + ph + 14 + (12 if sw in bad else 0)}' "
                       f"text-anchor='middle' fill='{colour}'>{esc(sw)}</text>")
    svg.append("</svg>")
    rows = sorted(names, key=lambda sw: (sw not in bad, stats[sw][2]))
    shown = [sw for sw in rows if sw in bad] + [sw for sw in rows if sw not in bad][:5]
    table = ["<table><tr><th>switch</th><th>nodes</th><th>median</th><th>lowest node</th>"
             "<th>named</th></tr>"]
    for sw in shown:
        low = min(per[sw], key=lambda t: t[1])
        named = [n for n, _ in per[sw] if n in marks and marks[n][0] == _RED]
        table.append(f"<tr><td class='{'named' if sw in bad else ''}'>{esc(sw)}"
                     f"{' (named)' if sw in bad else ''}</td><td class='num'>{len(per[sw])}</td>"
                     f"<td class='num'>{_fmt(stats[sw][2])}</td><td>{esc(low[0])} "
                     f"{_fmt(low[1])}</td><td>{esc(', '.join(named)) or '-'}</td></tr>")
    table.append("</table>")
    return ("<section id='switches'><h2>By leaf switch (Slurm topology)</h2><figure>"
            + "".join(svg) + "<figcaption>Named switches in red, named nodes as red dots; "
            "below, the named switches and the five with the lowest median.</figcaption>"
            "</figure>" + "".join(table) + "</section>")


def _heatmap(result: Mapping[str, Any]) -> str:
    """Node x node heat map of pair bandwidth (small partitions only)."""
    verdict = result["verdict"]
    nodes = verdict["nodes"]
    pairs = verdict["pairs"]
    where = {n: i for i, n in enumerate(nodes)}
    center = next((d["center"] for d in pairs.values()), 0.0) or 1.0
    cell = max(14, min(40, 600 // max(1, len(nodes))))
    left, top = 110, 110
    size = left + cell * len(nodes) + 20
    svg = [f'<svg viewBox="0 0 {size} {top + cell * len(nodes) + 20}" width="{size}" '
           f'height="{top + cell * len(nodes) + 20}" xmlns="http://www.w3.org/2000/svg" '
           'font-family="sans-serif" font-size="11">']
    for i, n in enumerate(nodes):
        y = top + i * cell
        svg.append(f'<text x="{left - 4}" y="{y + cell * 0.65}" text-anchor="end">'
                   f'{html.escape(n)}</text>')
        x = left + i * cell + cell / 2
        svg.append(f'<text x="{x}" y="{top - 6}" transform="rotate(-60 {x} {top - 6})">'
                   f'{html.escape(n)}</text>')
    for key, d in pairs.items():
        a, b = key.split("|")
        if a not in where or b not in where:
            continue
        for r, c in ((where[a], where[b]), (where[b], where[a])):
            svg.append(f'<rect x="{left + c * cell}" y="{top + r * cell}" width="{cell - 1}" '
                       f'height="{cell - 1}" fill="{_color(d["value"] / center)}">'
                       f'<title>{html.escape(a)} - {html.escape(b)}: {d["value"]:.1f} MB/s '
                       f'({-d["worse_by"] * 100:+.0f} %)</title></rect>')
    svg.append("</svg>")
    return ("<section id='heatmap'><h2>PingPong 1 MiB bandwidth per node pair (MB/s; green = "
            "partition median, red = 0)</h2>" + "".join(svg) + "</section>")


def _node_table(result: Mapping[str, Any], marks: Mapping[str, tuple[str, str]]) -> str:
    """Every node's figures, named nodes first; kept in a template and parsed
    only when opened (thousands of rows)."""
    esc = html.escape
    verdict = result["verdict"]
    table = verdict["table"]
    topo = result.get("topology") or {}
    figs = [f for f in ORDER if any(f in table.get(n, {}) for n in verdict["nodes"])]
    verdicts = node_verdicts(result)
    order = sorted(verdict["nodes"], key=lambda n: (verdicts[n] == "ok", n))
    head = ("<tr><th>node</th>" + ("<th>switch</th>" if topo else "")
            + "".join(f"<th>{esc(FIGURES[f].label)} ({esc(FIGURES[f].unit)})</th>" for f in figs)
            + "<th>verdict</th></tr>")
    rows = []
    for n in order:
        cells = []
        for f in figs:
            d = table.get(n, {}).get(f)
            cells.append("<td>-</td>" if d is None else
                         f"<td class='num{' named' if d['low'] else ''}'>{_fmt(d['value'])} "
                         f"{_pct(d)}</td>")
        cls = "named" if verdicts[n] != "ok" else ""
        rows.append(f"<tr><td class='{cls}'>{esc(n)}</td>"
                    + (f"<td>{esc(topo.get(n, '-'))}</td>" if topo else "") + "".join(cells)
                    + f"<td class='{cls}'>{esc(verdicts[n])}</td></tr>")
    return (f"<section id='nodes'><details class='all'><summary>All {len(order):,} nodes, "
            "named first (value and deviation from the partition median)</summary><template>"
            f"<div style='overflow-x:auto'><table>{head}{''.join(rows)}</table></div>"
            "</template></details></section>")


def write(result: Mapping[str, Any], directory: Path) -> dict[str, Path]:
    paths = {"json": directory / "vet.json", "html": directory / "vet.html",
             "text": directory / "vet.txt"}
    # whole or not at all: the gates read vet.json while a vetting may be writing it
    atomic_write(paths["json"], json.dumps(result, indent=1) + "\n", "storing the vetting")
    paths["html"].write_text(html_page(result))
    paths["text"].write_text(text(result))
    return paths
