"""``hpcval validate``: run the checks on a site and judge them."""

from __future__ import annotations

import argparse

from hpcval.runner import validate


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="run the checks on a site, print the verdict, write the HTML report",
        description="Run ReFrame with the site's configuration and references, print the "
        "verdict table and write an HTML report to var/<site>/html/. Exits non-zero when any "
        "check fails. Arguments after -- go to reframe (e.g. -- -t pingpong).",
    )
    p.add_argument("--site", default="local", help="site under site-configs/ (default: local)")
    p.add_argument("reframe_args", nargs=argparse.REMAINDER,
                   help="extra reframe options, after --")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    extra = [a for a in args.reframe_args if a != "--"] if args.reframe_args else []
    return validate(args.site, extra).exit_code
