"""``hpcval trend``: every figure's history with its change points."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from hpcval.core.errors import InputError
from hpcval.core.fileio import atomic_write, output_file
from hpcval.history.store import Store
from hpcval.reporting import trend, trendpage
from hpcval.reporting.report import check_areas
from hpcval.site import Site


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trend", help="every figure's history with detected change points (text and HTML)",
        description="For every figure of every test case stored for the site (or those "
        "--check/--figure select): the run medians over time and the change points found in "
        "them (a step or a slow drift that single-run verdicts cannot resolve). Prints the "
        "change points and writes var/<site>/html/trend.html: one page listing every figure with "
        "a sparkline (sortable, filterable by area, check and partition), the figures that "
        "moved first. Exit 1 when a series' latest "
        "change point is a move to worse.")
    p.add_argument("--site", default="local")
    p.add_argument("--check", help="a check name")
    p.add_argument("--figure", help="a performance variable")
    p.add_argument("--html", type=Path, help="where to write the page "
                   "(default var/<site>/html/trend.html)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    site = Site.load(args.site)
    if args.html is not None:
        args.html = output_file(args.html, "--html")
    store = Store(site.history_db)
    points = store.history(check=args.check, variable=args.figure)
    if not points:
        given = [f"--{name} {'*' if value is None else shlex.quote(value)}"
                 for name, value in (("check", args.check), ("figure", args.figure))]
        raise InputError(f"{site.history_db}: no stored figure matches {' '.join(given)}")
    series = trend.build(points)
    trend.attach_verdicts(series, store)
    print(trend.text(series), end="")
    out = args.html or site.html_dir / "trend.html"
    areas = check_areas(site.checks_dir)
    atomic_write(out, trendpage.dashboard(series, site.name, store, areas),
                 "writing the trend page")
    print(f"HTML: {out}")
    worse = [s for s in series if s.worse_now]
    return 1 if worse else 0
