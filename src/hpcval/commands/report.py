"""``hpcval report``: verdict and HTML report of a stored run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hpcval.run.runner import latest_report, republish_run
from hpcval.run.storedrun import judged_report
from hpcval.site import Site


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="print the verdict of a stored run and write its HTML report",
        description="Render a run hpcval stored and judged for the site (default: its latest) "
        "as a verdict table and an HTML report (latest.html only for the latest run). Exit 1 "
        "when the run failed, regressed, was interrupted or skipped every case; exit 2 for a "
        "report that is no run judged on this site (a dry run, another site's, a plain "
        "ReFrame run, an orphaned run).",
    )
    p.add_argument("--site", default="local", help="site whose results store to use")
    p.add_argument("run_report", nargs="?", type=Path,
                   help="a ReFrame JSON run report: a path, a file name in var/<site>/reports/ "
                   "or a run id (default: the latest)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    site = Site.load(args.site)
    if args.run_report:
        path = site.find_report(args.run_report)
        # latest.html is the latest run's page: an older run gets its own page only
        judged_report(site, path)  # what is refused is refused before the latest is sought
        latest = path.resolve() == latest_report(site, quiet=True).resolve()
    else:
        path, latest = latest_report(site), True
    _, failed = republish_run(site, path, sys.stdout, latest)  # the stdout of now
    return 1 if failed else 0
