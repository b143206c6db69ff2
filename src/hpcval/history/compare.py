"""A/B comparison of two stored runs, size by size.

Google Cloud's "Accelerating MPI applications using Google Virtual NIC (gVNIC)"
compares two NICs with IMB PingPong and quotes "26 % lower latency on average
for 2 KiB-4 MiB". :func:`compare_reports` does that for any two ReFrame
run reports (``unshaped`` vs ``1g``, yesterday vs today): for every test case
present in both runs and every series the check recorded (each message size),
the change from A to B in percent, and the mean change over a chosen range.
Where a check recorded no series, its judged performance variables are compared.
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from hpcval.core.errors import HpcvalError
from hpcval.core.figures import stored_direction
from hpcval.history.runreport import CaseResult, RunReport, load_run_report

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B?)\s*$", re.IGNORECASE)
_FACTORS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """``2KiB`` → 2048, ``4M`` → 4194304, ``512`` → 512 (binary multiples)."""
    m = _SIZE_RE.match(text)
    if not m:
        raise HpcvalError(f"not a message size: {text!r} (examples: 0, 512, 2KiB, 4MiB)")
    return int(float(m.group(1)) * _FACTORS[m.group(2).upper()])


def parse_range(text: str) -> tuple[int, int]:
    """``2KiB:4MiB`` → (2048, 4194304)."""
    lo, sep, hi = text.partition(":")
    if not sep:
        raise HpcvalError(f"range must be LOW:HIGH, e.g. 2KiB:4MiB (got {text!r})")
    low, high = parse_size(lo), parse_size(hi)
    if low > high:
        raise HpcvalError(f"range {text!r}: low end is above the high end")
    return low, high


def fmt_size(size: float) -> str:
    size = int(size)
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


@dataclass
class PointChange:
    x: float
    a: float
    b: float

    @property
    def change_pct(self) -> float | None:
        if self.a == 0:
            return None
        return (self.b - self.a) / self.a * 100.0


@dataclass
class SeriesComparison:
    """One column of one recorded series (e.g. PingPong bandwidth) in A and B."""

    case: str
    environ: str
    series: str
    column: str
    unit: str
    x_label: str
    x_unit: str
    points: list[PointChange] = field(default_factory=list)
    only_in_a: list[float] = field(default_factory=list)
    only_in_b: list[float] = field(default_factory=list)
    #: ``higher`` or ``lower``: the direction stored with the samples of the
    #: judged figure read from this column (declared by the check), else the
    #: unit's (:func:`hpcval.core.figures.stored_direction`); ``None``: unknown
    better: str | None = None

    @property
    def lower_is_better(self) -> bool:
        return self.better == "lower"

    def range_points(self, low: float | None, high: float | None) -> list[PointChange]:
        return [p for p in self.points if p.change_pct is not None
                and (low is None or p.x >= low) and (high is None or p.x <= high)]

    def mean_change(self, low: float | None, high: float | None) -> float | None:
        """Arithmetic mean of the per-size changes (in %) within [low, high]."""
        pts = self.range_points(low, high)
        if not pts:
            return None
        return sum(p.change_pct for p in pts) / len(pts)  # type: ignore[misc]


@dataclass
class Comparison:
    a: RunReport
    b: RunReport
    low: int | None
    high: int | None
    series: list[SeriesComparison]
    unmatched_a: list[str]
    unmatched_b: list[str]


def _case_key(c: CaseResult) -> tuple[str, str, str, str]:
    return (c.display_name, c.system, c.partition, c.environ)


def _judged_series(case: CaseResult) -> dict[str, dict]:
    """The judged figures as a series with one point each (x = 0)."""
    cols = {p.variable: {"unit": p.unit, "points": [[0, p.value]]}
            for p in case.perf if p.value is not None}
    judged = {v: {"column": v, "x": 0} for v in cols}
    return {"judged": {"x_label": "variable", "x_unit": "", "columns": cols,
                       "judged": judged}} if cols else {}


def _column_direction(spec: dict, column: str, unit: str, samples: dict) -> str | None:
    """The declared direction of a series column: the one stored with the
    samples of a judged figure read from it (all that do must agree), else the
    unit's; ``None`` where neither says."""
    stored = {samples[v].get("better") for v, where in (spec.get("judged") or {}).items()
              if isinstance(where, dict) and where.get("column") == column
              and isinstance(samples.get(v), dict)}
    return stored_direction(stored.pop() if len(stored) == 1 else None, unit)


def _compare_case(ca: CaseResult, cb: CaseResult) -> list[SeriesComparison]:
    out = []
    sa, sb = ca.series(), cb.series()
    if not sa or not sb:
        # a run whose recorded series are gone (or never were): judged figures only
        sa, sb = _judged_series(ca), _judged_series(cb)
    samples = cb.samples() or ca.samples()
    for name in [n for n in sa if n in sb]:
        spec_a, spec_b = sa[name], sb[name]
        for col, data_a in spec_a.get("columns", {}).items():
            data_b = spec_b.get("columns", {}).get(col)
            if data_b is None:
                continue
            pa = {float(x): float(y) for x, y in data_a.get("points", []) if y is not None}
            pb = {float(x): float(y) for x, y in data_b.get("points", []) if y is not None}
            unit = str(data_a.get("unit", ""))
            comp = SeriesComparison(
                case=ca.display_name, environ=ca.environ, series=name, column=col,
                unit=unit, better=_column_direction(spec_b, col, unit, samples),
                x_label=str(spec_a.get("x_label", "x")),
                x_unit=str(spec_a.get("x_unit", "")),
                points=[PointChange(x, pa[x], pb[x]) for x in sorted(pa) if x in pb],
                only_in_a=sorted(set(pa) - set(pb)), only_in_b=sorted(set(pb) - set(pa)),
            )
            out.append(comp)
    return out


def compare_reports(path_a: str | Path, path_b: str | Path, low: int | None = None,
                    high: int | None = None, check: str | None = None) -> Comparison:
    """Compare two ReFrame run reports; ``check`` restricts to cases whose
    name starts with it; ``low``/``high`` bound the range of the mean change."""
    ra, rb = load_run_report(path_a), load_run_report(path_b)
    cases_a = {_case_key(c): c for c in ra.cases if c.result != "skip"}
    cases_b = {_case_key(c): c for c in rb.cases if c.result != "skip"}
    if check:
        cases_a = {k: c for k, c in cases_a.items() if c.display_name.startswith(check)}
        cases_b = {k: c for k, c in cases_b.items() if c.display_name.startswith(check)}
    common = [k for k in cases_a if k in cases_b]
    if not common:
        raise HpcvalError(
            f"no test case in both runs{f' matching {check!r}' if check else ''} "
            f"(A: {', '.join(sorted(k[0] for k in cases_a)) or 'none'}; "
            f"B: {', '.join(sorted(k[0] for k in cases_b)) or 'none'})"
        )
    series = [s for k in sorted(common) for s in _compare_case(cases_a[k], cases_b[k])]
    return Comparison(
        a=ra, b=rb, low=low, high=high, series=series,
        unmatched_a=sorted(k[0] for k in cases_a if k not in cases_b),
        unmatched_b=sorted(k[0] for k in cases_b if k not in cases_a),
    )


def _num(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1f} %"


def _range_text(low: int | None, high: int | None) -> str:
    if low is None and high is None:
        return "all sizes"
    return f"{fmt_size(low or 0)} - {fmt_size(high) if high is not None else 'max'}"


def _verdict(s: SeriesComparison, mean: float | None) -> str:
    if mean is None or math.isclose(mean, 0.0, abs_tol=0.05):
        return "no change"
    word = ("lower" if mean < 0 else "higher")
    if s.better is None:
        return f"{abs(mean):.1f} % {word} in B"
    better = (mean < 0) == s.lower_is_better
    return f"{abs(mean):.1f} % {word} in B ({'better' if better else 'worse'})"


def comparison_text(comp: Comparison) -> str:
    """Per-size table of every compared series and the mean change over the range."""
    lines = [f"A: {comp.a.path} ({comp.a.session.get('time_start', '?')})",
             f"B: {comp.b.path} ({comp.b.session.get('time_start', '?')})", ""]
    for s in comp.series:
        lines.append(f"{s.case} [{s.environ}] {s.series}: {s.column} [{s.unit}]")
        xh = f"{s.x_label}" + (f" [{s.x_unit}]" if s.x_unit else "")
        rows = [(xh, "A", "B", "change")]
        for p in s.points:
            x = fmt_size(p.x) if s.x_unit == "B" else _num(p.x)
            rows.append((x, _num(p.a), _num(p.b), _pct(p.change_pct)))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for i, r in enumerate(rows):
            lines.append("  " + "  ".join(
                c.rjust(w) if j else c.ljust(w) for j, (c, w) in enumerate(zip(r, widths,
                                                                                strict=True))))
            if i == 0:
                lines.append("  " + "  ".join("-" * w for w in widths))
        low, high = (comp.low, comp.high) if s.x_unit == "B" else (None, None)
        mean = s.mean_change(low, high)
        n = len(s.range_points(low, high))
        lines.append(f"  mean change over {_range_text(low, high)} ({n} sizes): "
                     f"{_pct(mean)} -> {_verdict(s, mean)}")
        lines.append("")
    if comp.unmatched_a or comp.unmatched_b:
        lines.append("not compared: only in A: " + (", ".join(comp.unmatched_a) or "-")
                     + "; only in B: " + (", ".join(comp.unmatched_b) or "-"))
    return "\n".join(lines).rstrip() + "\n"


def _plot(s: SeriesComparison, low: int | None, high: int | None,
          labels: tuple[str, str] = ("A", "B")) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [p for p in s.points if p.x > 0 and p.a > 0 and p.b > 0]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    if pts:
        xs = [p.x for p in pts]
        ax1.plot(xs, [p.a for p in pts], marker="o", markersize=3, label=labels[0])
        ax1.plot(xs, [p.b for p in pts], marker="s", markersize=3, label=labels[1])
        ch = [(p.x, p.change_pct) for p in pts if p.change_pct is not None]
        if ch:
            ax2.plot([c[0] for c in ch], [c[1] for c in ch], marker="o", markersize=3,
                     color="tab:purple")
        ax2.axhline(0, color="grey", linewidth=0.8)
        mean = s.mean_change(low, high)
        if mean is not None:
            lo = low if low else min(xs)
            hi = high if high else max(xs)
            ax2.hlines(mean, lo, hi, colors="tab:red", linestyles="--",
                       label=f"mean {mean:+.1f} % ({_range_text(low, high)})")
            ax2.axvspan(lo, hi, color="tab:red", alpha=0.07)
        for ax in (ax1, ax2):
            ax.set_xscale("log", base=2)
            ax.set_xlabel(f"{s.x_label} [{s.x_unit}]")
            ax.grid(True, which="both", alpha=0.3)
        ax1.set_yscale("log")
        ax1.legend(fontsize="small")
        ax2.legend(fontsize="small")
    ax1.set_ylabel(f"{s.column} [{s.unit}]")
    ax2.set_ylabel("change B vs A [%]")
    fig.suptitle(f"{s.case} — {s.series}: {s.column}", fontsize="medium")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def comparison_html_section(comp: Comparison) -> str:
    """An HTML section (for :func:`hpcval.reporting.htmlreport.render_html`'s ``extra_sections``):
    the per-size table and a plot of A, B and the change, for every series."""
    esc = html.escape
    labels = (f"A {comp.a.session.get('time_start', '')}".strip(),
              f"B {comp.b.session.get('time_start', '')}".strip())
    parts = ["<h2>A/B comparison</h2>",
             f"<p>A: {esc(str(comp.a.path))} ({esc(str(comp.a.session.get('time_start')))})"
             f"<br>B: {esc(str(comp.b.path))} ({esc(str(comp.b.session.get('time_start')))})"
             "</p>"]
    for s in comp.series:
        low, high = (comp.low, comp.high) if s.x_unit == "B" else (None, None)
        mean = s.mean_change(low, high)
        parts.append(f"<h3>{esc(s.case)} [{esc(s.environ)}] {esc(s.series)}: "
                     f"{esc(s.column)}</h3>")
        parts.append(f"<p>mean change over {esc(_range_text(low, high))}: "
                     f"<b>{esc(_pct(mean))}</b> ({esc(_verdict(s, mean))})</p>")
        if any(p.x > 0 for p in s.points):
            parts.append(f"<img src='{_plot(s, low, high, labels)}' alt='{esc(s.column)}'>")
        parts.append("<table><tr><th>" + esc(s.x_label) + "</th><th>A</th><th>B</th>"
                     "<th>change</th></tr>")
        for p in s.points:
            x = fmt_size(p.x) if s.x_unit == "B" else _num(p.x)
            parts.append(f"<tr><td>{esc(x)}</td><td class='num'>{_num(p.a)}</td>"
                         f"<td class='num'>{_num(p.b)}</td>"
                         f"<td class='num'>{esc(_pct(p.change_pct))}</td></tr>")
        parts.append("</table>")
    return "\n".join(parts)
