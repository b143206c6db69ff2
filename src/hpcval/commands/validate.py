"""``hpcval validate``: run the checks on a site, store and judge them."""

from __future__ import annotations

import argparse
import os

from hpcval.lock import seconds
from hpcval.runner import DEFAULT_LOCK_TIMEOUT, validate
from hpcval.runsets import parse_tag
from hpcval.sizing import BUDGET_ENV, BUDGETS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="run the checks on a site, print the verdict, write the HTML report",
        description="Run ReFrame with the site's configuration and references, store every "
        "figure with its samples in var/<site>/, judge each against the site's references and "
        "against its own history, print the verdict and write an HTML report. Exit 0: all "
        "passed; 1: a check failed or a figure regressed; 2: wrong input; 3: environment "
        "fault (disk full, store unusable, lock held). Arguments after -- go to reframe "
        "(e.g. -- -t pingpong).",
    )
    p.add_argument("--site", default="local", help="site under site-configs/ (default: local)")
    p.add_argument("--record", action="store_true",
                   help="run the checks without judging them, then write the site's "
                   "references.yaml and host-expectations.yaml from what was measured "
                   "(for a new site; review the files before committing)")
    p.add_argument("--lock-timeout", type=seconds, default=DEFAULT_LOCK_TIMEOUT, metavar="S",
                   help="seconds to wait for another validation of the site to finish "
                   f"(default {DEFAULT_LOCK_TIMEOUT:g})")
    p.add_argument("--budget", choices=BUDGETS,
                   help="problem sizes: quick (minutes) or full (acceptance); default: the "
                   "site's partitions' extras.budget, else quick (docs/checks.md)")
    p.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                   help="store this tag with the run (repeatable), e.g. --tag nic=gvnic; "
                   "`hpcval compare tag:nic=gvnic ...` selects the runs by it and "
                   "`hpcval history` shows it")
    p.add_argument("reframe_args", nargs=argparse.REMAINDER,
                   help="extra reframe options, after --")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    extra = [a for a in args.reframe_args if a != "--"] if args.reframe_args else []
    if args.budget:
        os.environ[BUDGET_ENV] = args.budget  # the checks read it (hpcval.rfm.sizing)
    tags = dict(parse_tag(t) for t in args.tag)
    return validate(args.site, extra, record=args.record,
                    lock_timeout=args.lock_timeout, tags=tags or None).exit_code
