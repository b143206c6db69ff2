"""``hpcval trend``: every figure's history with its change points."""

from __future__ import annotations

import argparse
import html
from pathlib import Path

from hpcval import trend
from hpcval.errors import InputError
from hpcval.fileio import atomic_write
from hpcval.site import Site
from hpcval.store import Store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trend", help="every figure's history with detected change points (text and HTML)",
        description="For every figure of every test case stored for the site (or those "
        "--check/--figure select): the run medians over time and the change points found in "
        "them (a step or a slow drift that single-run verdicts cannot resolve). Prints the "
        "change points and writes var/<site>/html/trend.html. Exit 1 when a series' latest "
        "change point is a move to worse.")
    p.add_argument("--site", default="local")
    p.add_argument("--check", help="a check name")
    p.add_argument("--figure", help="a performance variable")
    p.add_argument("--html", type=Path, help="where to write the page "
                   "(default var/<site>/html/trend.html)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    site = Site.load(args.site)
    points = Store(site.history_db).history(check=args.check, variable=args.figure)
    if not points:
        raise InputError(f"{site.history_db}: no stored figure matches "
                         f"--check {args.check or '*'} --figure {args.figure or '*'}")
    series = trend.build(points)
    print(trend.text(series), end="")
    out = args.html or site.html_dir / "trend.html"
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>hpcval trends "
            f"{html.escape(site.name)}</title><style>body{{font-family:system-ui,sans-serif;"
            "margin:1.5em;max-width:1360px}.grid{display:flex;flex-wrap:wrap;gap:8px}"
            "figure{margin:0}img{max-width:100%}</style></head><body>"
            f"<h1>Trends of site {html.escape(site.name)}</h1>"
            + trend.html_section(series, "Figures") + "</body></html>")
    atomic_write(out, page, "writing the trend page")
    print(f"HTML: {out}")
    worse = [s for s in series if s.worse_now]
    return 1 if worse else 0
