"""``hpcval store``: check or rebuild a site's results store."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hpcval.core.errors import EnvironmentFault
from hpcval.history.rebuild import KEEP_OLD, rebuild
from hpcval.history.store import Store, run_reports
from hpcval.run.lock import seconds, site_lock
from hpcval.site import Site

#: Default wait of ``store rebuild`` for a validation holding the site lock, in seconds.
REBUILD_LOCK_TIMEOUT = 60.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("store", help="check or rebuild a site's results store",
                       description="The results store (var/<site>/history.sqlite) indexes the "
                       "site's JSON run reports. `check` verifies it; `rebuild` makes it anew "
                       "from the reports hpcval judged, keeping every run of the old store "
                       "no report gives back and the old store aside; a report hpcval never "
                       "judged is listed and skipped. Exit 3 when a file could not be read "
                       "(named; the store is rebuilt all the same).")
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
    reports_dir = site.reports_dir
    # under the site's lock: a validation storing its run meanwhile would
    # write into the file moved aside
    with site_lock(site.lock_file, "store rebuild", args.lock_timeout,
                   log=lambda m: print(m, file=sys.stderr, flush=True)):
        from hpcval.run.earlier import settle_earlier_run

        _readable_reports(reports_dir, site.history_db)
        settle_earlier_run(site)  # a run whose hpcval died: stopped, marked orphaned
        done = rebuild(Store(site.history_db), run_reports(reports_dir), site.name)
    for path in done.cleaned:
        print(f"removed {path}: left by a rebuild that was killed before it ended")
    for reason in done.skipped:
        print(f"skipped: {reason}")
    for reason in done.carried:
        print(f"carried over: {reason}")
    if done.nonfinite:
        figures = sorted({name for _, name, _ in done.nonfinite})
        runs = sorted({run for run, _, _ in done.nonfinite})
        print(f"left out: {sum(n for *_, n in done.nonfinite)} NaN/inf sample(s) of "
              f"{len(figures)} figure(s) in {len(runs)} run(s), not measurements "
              f"(first: run {runs[0]}, {figures[0]}); they are neither stored nor counted")
    if done.kept is not None:
        state = "healthy" if done.old_healthy else "corrupt"
        print(f"previous store ({state}) kept as {done.kept}")
    for path in done.removed:
        print(f"removed {path}: an older copy of a healthy store (the newest {KEEP_OLD} "
              "are kept)")
    if len(done.broken_kept) > 1:
        size = sum(p.stat().st_size for p in done.broken_kept if p.exists())
        print(f"{len(done.broken_kept)} corrupt stores kept aside in {site.var} "
              f"(history.sqlite.*.broken, {size / 2**20:.1f} MiB): never removed by hpcval; "
              "delete them once you no longer need them")
    carried = done.stored - done.imported
    print(f"{site.history_db}: rebuilt: {done.stored} run(s), {done.imported} from their "
          f"run reports, {carried} carried over from the old store")
    problems = done.damaged + done.not_imported
    if problems:
        for line in done.damaged:
            print(f"could not read: {line}")
        for line in done.not_imported:
            print(f"not imported: {line}")
        if done.not_imported:
            what = (f"; {len(done.not_imported)} run(s) not imported: their files are left as "
                    f"they are, the store replaced is kept as {done.kept}; restore them from a "
                    "backup and rebuild again")
        else:
            what = ("; every run of the old store kept; restore them from a backup or leave "
                    "them: a rebuild carries their runs over from the store it replaces")
        raise EnvironmentFault(
            f"{site.history_db}: rebuilt, but {len(problems)} file(s) could not be read or "
            f"imported (listed above, first: {problems[0].split(': ', 1)[0]}){what}")
    return 0


def _readable_reports(reports_dir: Path, db: Path) -> None:
    """Refuse to rebuild from a reports directory that is not there or cannot
    be read: every run would be taken from the old store, or lost with it."""
    try:
        os.listdir(reports_dir)  # Path.glob says nothing of an unreadable one
    except FileNotFoundError:
        raise EnvironmentFault(
            f"{reports_dir}: no reports directory, nothing to rebuild {db} from; the store "
            "is left as it is (is HPCVAL_VAR the results store's folder?)") from None
    except OSError as err:
        raise EnvironmentFault(f"{reports_dir}: cannot read the reports directory "
                               f"({err.strerror}); the store is left as it is") from None
