"""``hpcval compare``: A/B comparison of two stored runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from hpcval.core.errors import HpcvalError
from hpcval.history.compare import (
    compare_reports,
    comparison_html_section,
    comparison_text,
    parse_range,
)
from hpcval.reporting.htmlreport import write_html
from hpcval.site import Site


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="A/B comparison of two stored runs: change per message size and range mean",
        description="Compare two ReFrame run reports (e.g. the lab at 'unshaped' and at '1g', "
        "or yesterday and today): the change from A to B for every message size of every "
        "recorded series, and the mean change over --range. Prints a table and writes an "
        "HTML report with plots to var/<site>/html/.",
    )
    p.add_argument("run_a", help="run report A: a path, or a file name in var/<site>/reports/")
    p.add_argument("run_b", help="run report B: a path, or a file name in var/<site>/reports/")
    p.add_argument("--site", default="local", help="site whose results store to use")
    p.add_argument("--range", dest="size_range", default="2KiB:4MiB",
                   help="message sizes of the mean change, LOW:HIGH (default 2KiB:4MiB, "
                   "the range of the gVNIC article); 'all' for every size")
    p.add_argument("--check", help="compare only test cases whose name starts with this")
    p.add_argument("--html", type=Path, help="where to write the HTML report "
                   "(default var/<site>/html/compare-<A>-<B>.html)")
    p.set_defaults(func=_run)


def _resolve(arg: str, site: str) -> Path:
    path = Path(arg)
    if path.is_file():
        return path
    reports = Site.load(site).reports_dir
    stored = reports / arg
    for candidate in (stored, stored.with_suffix(".json")):
        if candidate.is_file():
            return candidate
    raise HpcvalError(f"{arg}: no such run report (nor in {reports})")


def _run(args: argparse.Namespace) -> int:
    a, b = _resolve(args.run_a, args.site), _resolve(args.run_b, args.site)
    low, high = (None, None) if args.size_range == "all" else parse_range(args.size_range)
    comp = compare_reports(a, b, low, high, check=args.check)
    print(comparison_text(comp), end="")
    out = args.html or Site.load(args.site).html_dir / f"compare-{a.stem}-{b.stem}.html"
    write_html(comp.b, out, extra_sections=[comparison_html_section(comp)])
    print(f"HTML report: {out}")
    return 0
