"""``hpcval store``: check or rebuild a site's results store."""

from __future__ import annotations

import argparse
import sys

from hpcval.history.store import Store, run_reports
from hpcval.run.lock import seconds, site_lock
from hpcval.site import Site

#: Default wait of ``store rebuild`` for a validation holding the site lock, in seconds.
REBUILD_LOCK_TIMEOUT = 60.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("store", help="check or rebuild a site's results store",
                       description="The results store (var/<site>/history.sqlite) indexes the "
                       "site's JSON run reports. `check` verifies it; `rebuild` makes it anew "
                       "from the reports hpcval judged (a corrupt file is kept aside, nothing "
                       "is lost; a report hpcval never judged is listed and skipped).")
    ssub = p.add_subparsers(dest="action", metavar="ACTION")
    ssub.required = True
    c = ssub.add_parser("check", help="verify the store's integrity")
    c.add_argument("--site", default="local")
    c.set_defaults(func=_check)
    r = ssub.add_parser("rebuild", help="make the store anew from the run reports")
    r.add_argument("--site", default="local")
    r.add_argument("--lock-timeout", type=seconds, default=REBUILD_LOCK_TIMEOUT, metavar="S",
                   help="wait at most S seconds for a validation of the site to finish "
                   f"(default {REBUILD_LOCK_TIMEOUT:g})")
    r.set_defaults(func=_rebuild)


def _check(args: argparse.Namespace) -> int:
    site = Site.load(args.site)
    runs = Store(site.history_db).runs()
    print(f"{site.history_db}: OK ({len(runs)} run{'s' if len(runs) != 1 else ''})")
    return 0


def _rebuild(args: argparse.Namespace) -> int:
    site = Site.load(args.site)
    # under the site's lock: a validation storing its run meanwhile would
    # write into the file moved aside
    with site_lock(site.lock_file, "store rebuild", args.lock_timeout,
                   log=lambda m: print(m, file=sys.stderr, flush=True)):
        from hpcval.run.earlier import settle_earlier_run

        settle_earlier_run(site)  # a run whose hpcval died: stopped, marked orphaned
        reports = run_reports(site.reports_dir)
        count, skipped, kept = Store(site.history_db).rebuild(reports, site.name)
    if kept is not None:
        print(f"previous store (corrupt) kept as {kept}")
    for reason in skipped:
        print(f"skipped: {reason}")
    print(f"{site.history_db}: rebuilt from {count} run report(s)")
    return 0
