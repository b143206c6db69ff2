"""``hpcval report``: verdict and HTML report of a stored run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hpcval.run.runner import latest_report, republish
from hpcval.site import Site


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="print the verdict of a stored run and write its HTML report",
        description="Render a ReFrame run report (default: the site's latest) as a verdict "
        "table and an HTML report. Exits non-zero when the run had failures.",
    )
    p.add_argument("--site", default="local", help="site whose results store to use")
    p.add_argument("run_report", nargs="?", type=Path,
                   help="a ReFrame JSON run report: a path, a file name in var/<site>/reports/ "
                   "or a run id (default: the latest)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    site = Site.load(args.site)
    path = site.find_report(args.run_report) if args.run_report else latest_report(site)
    report = republish(site, path, sys.stdout)  # the stdout of now, not of import time
    return 1 if report.failures else 0
