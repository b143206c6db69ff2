"""``hpcval compare``: before and after, two sets of stored runs (docs/compare.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hpcval.core.errors import HpcvalError, InputError
from hpcval.core.fileio import atomic_write
from hpcval.history.compare import (
    compare_reports,
    comparison_html_section,
    comparison_text,
    parse_range,
)
from hpcval.reporting.htmlreport import write_html
from hpcval.site import Site

SIDE_HELP = ("run ids (RUN or RUN,RUN,...), tag:KEY=VALUE (runs validated with --tag), "
             "baseline (the accepted baseline), all (every stored run); or a run report file")

#: what a comparison of two report files says (one run per side)
NO_INTERVAL = ("one run per side: plain changes without an interval (the run-to-run noise is "
               "unknown); 2 runs per side give an interval, and `hpcval compare RUN,RUN "
               "RUN,RUN` on stored runs says how many a +-5 % answer needs (docs/compare.md)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="before and after: two sets of runs, per figure and size, with intervals",
        description="Compare side B with side A: for every figure and message size the "
        "ratio B/A with a confidence interval from the run-to-run spread of both sides, one "
        "test per family (Holm across families), and the outcome better, worse, same "
        "(within --margin) or inconclusive (with the runs per side an answer needs). Each "
        "side is a set of stored runs; two run report files compare one run each without "
        "an interval. Prints the conclusion first and writes an HTML page to "
        "var/<site>/html/ (docs/compare.md).")
    p.add_argument("run_a", metavar="A", help="side A (before): " + SIDE_HELP)
    p.add_argument("run_b", metavar="B", help="side B (after): " + SIDE_HELP)
    p.add_argument("--site", default="local", help="site whose results store to use")
    for side in ("a", "b"):
        up = side.upper()
        p.add_argument(f"--{side}-since", metavar="TIME",
                       help=f"side {up}: runs started at or after this UTC time "
                       "(2026-11-20 or 2026-11-20T14:00)")
        p.add_argument(f"--{side}-until", metavar="TIME",
                       help=f"side {up}: runs started at or before this UTC time")
        p.add_argument(f"--{side}-partition", metavar="P",
                       help=f"side {up}: test cases of this partition only")
        p.add_argument(f"--{side}-environ", metavar="E",
                       help=f"side {up}: test cases of this programming environment only "
                       "(e.g. --a-environ impi --b-environ openmpi)")
    p.add_argument("--since", metavar="TIME", help="both sides: runs started at or after")
    p.add_argument("--until", metavar="TIME", help="both sides: runs started at or before")
    p.add_argument("--margin", default="5%",
                   help="equivalence margin: `same` when every figure's interval lies "
                   "inside +-margin (default 5%%)")
    p.add_argument("--range", dest="size_range", default="2KiB:4MiB",
                   help="message sizes of the mean change, LOW:HIGH (default 2KiB:4MiB, "
                   "the range of the gVNIC article); 'all' for every size")
    p.add_argument("--check", help="compare only test cases whose name starts with this")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--html", type=Path, help="where to write the HTML page "
                   "(default var/<site>/html/compare-<A>-<B>.html)")
    p.set_defaults(func=_run)


def _report_file(arg: str, site: str) -> Path | None:
    path = Path(arg)
    if path.is_file():
        return path
    if "," in arg or ":" in arg or arg in ("baseline", "all"):
        return None
    try:
        reports = Site.load(site).reports_dir
    except HpcvalError:
        return None
    for candidate in (reports / arg, (reports / arg).with_suffix(".json")):
        if candidate.is_file():
            return candidate
    return None


def parse_margin(text: str) -> float:
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise InputError(f"--margin {text!r}: give a per cent between 0 and 100 (e.g. 5%) "
                         "or a fraction (0.05)")
    return value


def _run(args: argparse.Namespace) -> int:
    margin = parse_margin(args.margin)
    low, high = (None, None) if args.size_range == "all" else parse_range(args.size_range)
    fa, fb = _report_file(args.run_a, args.site), _report_file(args.run_b, args.site)
    if fa is not None and fb is not None:
        return _reports(args, fa, fb, low, high)
    if (fa is None) != (fb is None):
        given = args.run_a if fa is not None else args.run_b
        raise InputError(f"{given}: a run report file; compare two report files, or two "
                         "sets of stored runs (run ids, tag:KEY=VALUE, baseline, all)")
    return _sets(args, margin, low, high)


def _reports(args: argparse.Namespace, a: Path, b: Path, low: int | None,
             high: int | None) -> int:
    comp = compare_reports(a, b, low, high, check=args.check)
    if args.json:
        print(json.dumps({"outcome": "no-interval", "note": NO_INTERVAL,
                          "a": str(a), "b": str(b),
                          "series": [{"case": s.case, "environ": s.environ,
                                      "series": s.series, "column": s.column,
                                      "unit": s.unit, "mean_change_pct":
                                      s.mean_change(low, high) if s.x_unit == "B" else
                                      s.mean_change(None, None),
                                      "points": [[p.x, p.a, p.b] for p in s.points]}
                                     for s in comp.series]}, indent=1))
    else:
        print(f"NO INTERVAL: {NO_INTERVAL}")
        print(comparison_text(comp), end="")
    out = args.html or Site.load(args.site).html_dir / f"compare-{a.stem}-{b.stem}.html"
    write_html(comp.b, out, extra_sections=[
        f"<p class='banner'>{NO_INTERVAL}</p>", comparison_html_section(comp)])
    if not args.json:
        print(f"HTML report: {out}")
    return 0


def _sets(args: argparse.Namespace, margin: float, low: int | None, high: int | None) -> int:
    from hpcval.history.judging.compare import compare_sets
    from hpcval.history.runsets import Side, left_out_text, resolve
    from hpcval.history.store import Store
    from hpcval.reporting import comparepage

    site = Site.load(args.site)
    settings = site.load_judging()
    sides = [Side.parse(up, spec, getattr(args, f"{side}_since") or args.since,
                        getattr(args, f"{side}_until") or args.until,
                        getattr(args, f"{side}_partition"), getattr(args, f"{side}_environ"))
             for side, up, spec in (("a", "A", args.run_a), ("b", "B", args.run_b))]
    got = resolve(Store(site.history_db), sides[0], sides[1], settings, check=args.check)
    size_range = None if low is None or high is None else (float(low), float(high))
    comp = compare_sets(got.figures, settings, margin=margin, size_range=size_range)
    info = [comparepage.SideInfo("A", sides[0].describe(), got.runs_a),
            comparepage.SideInfo("B", sides[1].describe(), got.runs_b)]
    only = [got.only_a, got.only_b]
    out = args.html or site.html_dir / f"compare-{_slug(args.run_a)}-{_slug(args.run_b)}.html"
    atomic_write(out, comparepage.page(comp, info, f"{args.run_a} vs {args.run_b}", only),
                 "writing the comparison page")
    if args.json:
        print(json.dumps({**comparepage.as_json(comp, info, only), "html": str(out),
                          "left_out": [{"run": r, "why": w}
                                       for r, w in sorted(got.left_out.items())]},
                         indent=1, default=str))
    else:
        print(comparepage.text(comp, info, only, str(out)), end="")
        if got.left_out:
            print(left_out_text(got.left_out))
    return 0


def _slug(spec: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_.=" else "_" for c in spec)
    return keep[:60] or "side"
