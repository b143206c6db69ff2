"""Results a person reads: the verdict table and the HTML report.

Both are rendered from ReFrame's JSON run report (``var/<site>/reports/``),
so a report can be made again at any time from stored results. Series a check
recorded with :meth:`hpcval.rfm.HpcvalTest.record_series` (for example the
whole IMB table) are plotted with the judged reference band. Nothing here
imports ReFrame or matplotlib: plots are inline SVG (:mod:`hpcval.svgplot`).
"""

from __future__ import annotations

import html
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval import svgplot
from hpcval.errors import HpcvalError
from hpcval.series import load_samples, load_series


@dataclass(frozen=True)
class PerfValue:
    """One judged figure of one test case."""

    variable: str
    value: float | None
    reference: float | None
    lower: float | None
    upper: float | None
    unit: str
    result: str

    def bounds(self) -> tuple[float | None, float | None]:
        """Absolute bounds, computed as ReFrame does."""
        ref = self.reference

        def bound(thres: float | None) -> float | None:
            if thres is None or ref is None:
                return None
            if ref == 0:
                return thres
            return ref * (1 + thres) if ref > 0 else ref * (1 - thres)

        return bound(self.lower), bound(self.upper)


@dataclass
class CaseResult:
    """One test case (check × partition × environment) of a run."""

    check: str
    display_name: str
    system: str
    partition: str
    environ: str
    result: str
    fail_phase: str | None
    fail_reason: str | None
    mpi_stack: str
    perf: list[PerfValue]
    outputdir: str | None
    stagedir: str | None
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.result in ("pass", "xfail")

    @property
    def skipped(self) -> bool:
        return self.result == "skip"

    def series(self) -> dict[str, Any]:
        """Series the check recorded, from its output or stage directory."""
        return load_series(self.outputdir, self.stagedir)

    def samples(self) -> dict[str, Any]:
        """Samples of the judged figures, from its output or stage directory."""
        return load_samples(self.outputdir, self.stagedir)


@dataclass
class RunReport:
    """A ReFrame run report, reduced to what hpcval shows."""

    path: Path
    session: dict[str, Any]
    cases: list[CaseResult]

    @property
    def failures(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.passed and not c.skipped]

    @property
    def skips(self) -> list[CaseResult]:
        return [c for c in self.cases if c.skipped]

    def skip_reasons(self) -> list[tuple[str, int]]:
        """Why cases were skipped: (reason, how many), most frequent first."""
        counts = Counter(skip_reason(c) for c in self.skips)
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))

    def headline(self) -> str:
        """``24 passed, 0 failed, 12 skipped: PASS``."""
        passed = sum(c.passed for c in self.cases)
        failed = len(self.failures)
        return (f"{passed} passed, {failed} failed, {len(self.skips)} skipped: "
                f"{'FAIL' if failed else 'PASS'}")


def skip_reason(case: CaseResult) -> str:
    """A skip's reason, first line, without ReFrame's prefix: from the case's
    ``skip_reason`` (:class:`hpcval.rfm.HpcvalTest` records it; ReFrame 4.10's
    report has no reason for a skip), else ReFrame's ``fail_reason``."""
    reason = (str(case.raw.get("skip_reason") or "") or case.fail_reason
              or "no reason given").splitlines()[0]
    for prefix in ("SkipTestError: ", "skipped: "):
        reason = reason.removeprefix(prefix)
    return reason.strip() or "no reason given"


def load_run_report(path: str | Path) -> RunReport:
    """Read a ReFrame JSON run report (the last run of each test case counts,
    so retries replace failures)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise HpcvalError(f"{path}: run report not found") from None
    except (OSError, ValueError) as err:
        raise HpcvalError(f"{path}: not a readable ReFrame run report: {err}") from None
    try:
        runs = data["runs"]
        session = data["session_info"]
    except (KeyError, TypeError):
        raise HpcvalError(f"{path}: not a ReFrame run report (no 'runs'/'session_info')") \
            from None
    latest: dict[str, dict[str, Any]] = {}
    try:
        for run in runs:
            for tc in run.get("testcases", []):
                key = f"{tc.get('unique_name')}@{tc.get('system')}:{tc.get('partition')}+" \
                      f"{tc.get('environ')}"
                latest[key] = tc
        cases = [_case(tc) for tc in latest.values()]
    except (AttributeError, TypeError, ValueError) as err:
        raise HpcvalError(f"{path}: not a ReFrame run report (runs/testcases of the wrong "
                          f"shape: {err})") from None
    return RunReport(path, session, cases)


def _case(tc: dict[str, Any]) -> CaseResult:
    perf = []
    for key, vals in (tc.get("perfvalues") or {}).items():
        var = key.rsplit(":", 1)[-1]
        value, ref, lower, upper, unit, result = (list(vals) + [None] * 6)[:6]
        perf.append(PerfValue(var, value, ref, lower, upper, unit or "", result or "?"))
    display = tc.get("display_name") or tc.get("name", "?")
    return CaseResult(
        check=display.split()[0],
        display_name=display,
        system=tc.get("system", "?"),
        partition=tc.get("partition", "?"),
        environ=tc.get("environ", "?"),
        result=tc.get("result", "?"),
        fail_phase=tc.get("fail_phase"),
        fail_reason=tc.get("fail_reason"),
        mpi_stack=str(tc.get("mpi_stack", "")),
        perf=perf,
        outputdir=tc.get("outputdir"),
        stagedir=tc.get("stagedir"),
        raw=tc,
    )


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0"
    mag = abs(value)
    if mag >= 1000:
        return f"{value:,.0f}"
    if mag >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _bounds_text(p: PerfValue) -> str:
    lo, hi = p.bounds()
    if lo is None and hi is None:
        return "unbounded"
    if lo is None:
        return f"<= {_fmt(hi)}"
    if hi is None:
        return f">= {_fmt(lo)}"
    return f"{_fmt(lo)} .. {_fmt(hi)}"


def verdict_rows(report: RunReport) -> list[list[str]]:
    """Rows of the verdict table: check, environment, variable, value,
    reference, bounds, result; one row for a case that failed before any
    figure was judged, with the phase and reason."""
    rows = []
    for c in sorted(report.cases, key=lambda c: (c.display_name, c.environ)):
        where = f"{c.partition}+{c.environ}"
        if not c.perf or (not c.passed and all(p.value is None for p in c.perf)):
            reason = (c.fail_reason or "").splitlines()[0] if c.fail_reason else ""
            detail = f"{c.fail_phase}: {reason}" if c.fail_phase else reason
            rows.append([c.display_name, where, "-", "-", "-", "-", c.result.upper(), detail])
            continue
        for p in c.perf:
            verdict = {"pass": "PASS", "fail": "FAIL"}.get(p.result, p.result.upper())
            rows.append([
                c.display_name, where, p.variable, f"{_fmt(p.value)} {p.unit}".strip(),
                _fmt(p.reference), _bounds_text(p), verdict, "",
            ])
    return rows


HEADER = ["check", "partition+environ", "variable", "value", "reference", "bounds", "result"]


def verdict_table(report: RunReport) -> str:
    """The verdict table as aligned text, with failure reasons below it."""
    rows = verdict_rows(report)
    table = [HEADER] + [r[:7] for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
             for r in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    failed_cases = {(c.display_name, f"{c.partition}+{c.environ}") for c in report.failures}
    notes = [f"  {r[0]} ({r[1]}): {r[7]}" for r in rows
             if r[7] and (r[0], r[1]) in failed_cases]
    out = "\n".join(lines) + "\n"
    if notes:
        out += "\nFailures:\n" + "\n".join(notes) + "\n"
    for c in report.cases:
        for p in c.perf:
            if p.result == "fail":
                out += (f"  {c.display_name} ({c.environ}): {p.variable} = {_fmt(p.value)} "
                        f"{p.unit} is outside {_bounds_text(p)} (reference {_fmt(p.reference)})\n")
    skips = report.skip_reasons()
    if skips:
        out += "\nSkipped:\n" + "".join(f"  {n} x {reason}\n" for reason, n in skips)
    return out + f"\n{report.headline()}\n"


def _plot_case(case: CaseResult, name: str, spec: dict[str, Any]) -> list[str]:
    """One log-log SVG panel per column of a recorded series, with each judged
    point and its reference band."""
    perf = {p.variable: p for p in case.perf}
    panels = []
    for label, col in spec.get("columns", {}).items():
        judged = []
        for var, where in spec.get("judged", {}).items():
            p = perf.get(var)
            if p is None or where.get("column") != label:
                continue
            lo, hi = p.bounds()
            judged.append(svgplot.Judged(float(where.get("x", 0)), p.value, lo, hi,
                                         p.result != "fail"))
        svg = svgplot.panel(f"{name}: {label}",
                            f"{spec.get('x_label', 'x')} [{spec.get('x_unit', '')}]",
                            f"{label} [{col.get('unit', '')}]",
                            [(float(x), y) for x, y in col.get("points", [])], judged)
        if svg:
            panels.append(svg)
    return panels


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1320px}
table{border-collapse:collapse;font-size:.9em;max-width:100%}
td,th{border:1px solid #ccc;padding:.25em .6em;overflow-wrap:anywhere}
th{background:#f0f0f0;text-align:left;white-space:nowrap;overflow-wrap:normal}td.num{text-align:right;font-family:monospace}
.PASS{color:#176a1d;font-weight:bold}.FAIL,.ERROR{color:#b00020;font-weight:bold}
.banner{font-size:1.3em;padding:.4em .8em;display:inline-block;border-radius:4px}
.banner.PASS{background:#e3f4e4}.banner.FAIL{background:#fbe3e6}
pre{background:#f7f7f7;padding:.5em;white-space:pre-wrap;overflow-wrap:anywhere}
.plots{display:flex;flex-wrap:wrap;gap:1em}
figure{margin:0 0 1.5em 0;max-width:100%}svg{max-width:100%;height:auto}
figcaption{font-size:.85em;max-width:640px;overflow-wrap:anywhere}
"""


def render_html(report: RunReport, extra_sections: list[str] | None = None) -> str:
    """A self-contained HTML page: session facts, verdict, plots, failures."""
    s = report.session
    verdict = "FAIL" if report.failures else "PASS"
    esc = html.escape
    facts = [
        ("host", s.get("hostname")), ("started", s.get("time_start")),
        ("elapsed", f"{s.get('time_elapsed', 0):.1f} s" if s.get("time_elapsed") else None),
        ("ReFrame", s.get("version")), ("command", s.get("cmdline")),
        ("run report", str(report.path)),
    ]
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>hpcval report {esc(str(s.get('time_start', '')))}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>hpcval validation report</h1>",
        f"<p class='banner {verdict}'>{esc(report.headline())}</p>",
        "<table>" + "".join(f"<tr><th>{esc(k)}</th><td>{esc(str(v))}</td></tr>"
                            for k, v in facts if v) + "</table>",
        "<h2>Verdict</h2><table><tr>"
        + "".join(f"<th>{esc(h)}</th>" for h in HEADER) + "</tr>",
    ]
    for row in verdict_rows(report):
        cells = []
        for i, cell in enumerate(row[:7]):
            cls = " class='num'" if i in (3, 4) else (f" class='{cell}'" if i == 6 else "")
            cells.append(f"<td{cls}>{esc(cell)}</td>")
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</table>")
    plots = []
    for case in sorted(report.cases, key=lambda c: (c.display_name, c.environ)):
        for name, spec in case.series().items():
            panels = _plot_case(case, name, spec)
            if panels:
                plots.append(f"<figure><div class='plots'>{''.join(panels)}</div><figcaption>"
                             f"{esc(case.display_name)} on {esc(case.partition)}+"
                             f"{esc(case.environ)} ({esc(case.mpi_stack)}). Diamonds: judged "
                             "figures (red: failed); shaded: reference band; sizes of 0 B are "
                             "judged but not drawn on the log axis.</figcaption></figure>")
    if plots:
        parts.append("<h2>Measured series</h2>" + "".join(plots))
    skips = report.skip_reasons()
    if skips:
        parts.append("<h2>Skipped</h2><table><tr><th>cases</th><th>reason</th></tr>"
                     + "".join(f"<tr><td class='num'>{n}</td><td>{esc(reason)}</td></tr>"
                               for reason, n in skips) + "</table>")
    fails = [c for c in report.failures if c.fail_reason]
    if fails:
        parts.append("<h2>Failures</h2>")
        for c in fails:
            parts.append(f"<h3>{esc(c.display_name)} ({esc(c.environ)}), phase "
                         f"{esc(str(c.fail_phase))}</h3><pre>{esc(c.fail_reason or '')}</pre>")
    parts.extend(extra_sections or [])
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html(report: RunReport, out: str | Path,
               extra_sections: list[str] | None = None) -> Path:
    """Write the HTML report atomically (never a half-written file)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        tmp.write_text(render_html(report, extra_sections))
        tmp.replace(out)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise HpcvalError(f"{out}: cannot write the HTML report: {err.strerror}") from None
    return out
