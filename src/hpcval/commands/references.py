"""``hpcval references``: validate a site's references, capture new ones."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hpcval.core.errors import InputError, ReferencesError
from hpcval.core.fileio import atomic_write, keep_backup
from hpcval.history import contract
from hpcval.run.runner import latest_report
from hpcval.run.storedrun import judged_report
from hpcval.site import Site, refresolve
from hpcval.site import references as refs


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("references", help="check or capture a site's references")
    rsub = p.add_subparsers(dest="action", metavar="ACTION")
    rsub.required = True

    c = rsub.add_parser("check", help="validate the files of site-configs/<site>/",
                        description="Validate every site file a run reads, as `hpcval "
                        "validate` does before any check runs: the references against the "
                        "checks in reframe-checks/ (structure, numbers, thresholds, check "
                        "names), host-expectations.yaml, judging.yaml and mpi-tuning.yaml.")
    c.add_argument("--site", default="local")
    c.set_defaults(func=_check)

    cap = rsub.add_parser(
        "capture", help="write references from a stored run's measured values",
        description="Turn the figures of a run report into references "
        "[value, -tolerance, +tolerance, unit]. Prints the YAML, or with --write replaces the "
        "site's references.yaml (the old file is kept as references.yaml.<UTC time>-<random>.bak).")
    cap.add_argument("--site", default="local")
    cap.add_argument("--tolerance", type=float,
                     help="allowed relative deviation from one run's value, e.g. 0.2 for "
                     "20%% on the worse side (the better side keeps what the file had)")
    cap.add_argument("--from-history", action="store_true",
                     help="bands from the site's accepted runs in its results store: "
                     "reference = median of the runs' medians, bound = the worst sample seen "
                     "with --margin (docs/references.md)")
    cap.add_argument("--margin", type=float, default=None,
                     help=f"with --from-history (default {contract.DEFAULT_MARGIN:g})")
    cap.add_argument("--runs", nargs="+", metavar="RUN_ID",
                     help="with --from-history: these runs instead of the accepted ones")
    cap.add_argument("--write", action="store_true", help="replace the site's references file")
    cap.add_argument("run_report", nargs="?", type=Path,
                     help="ReFrame JSON run report: a path, a file name in var/<site>/reports/ "
                     "or a run id (default: the site's latest)")
    cap.set_defaults(func=_capture)


def _check(args: argparse.Namespace) -> int:
    site = Site.load(args.site)
    checked = site.check_files()
    for path in checked:
        if path == site.references:
            n = len(checked[path].entries)
            print(f"{path}: OK ({n} check{'s' if n != 1 else ''}: "
                  f"{', '.join(sorted(checked[path].entries))})")
        else:
            print(f"{path}: OK")
    return 0


def _capture(args: argparse.Namespace) -> int:
    site = Site.load(args.site)
    if args.from_history:
        if args.tolerance is not None or args.run_report:
            raise InputError("--from-history takes no --tolerance and no run report")
        margin = contract.DEFAULT_MARGIN if args.margin is None else args.margin
        omitted: list[str] = []
        if not args.write:
            data = contract.references_from_history(site, args.runs, margin=margin,
                                                    omitted=omitted)
            sys.stdout.write(refresolve.dump_references(data))
        else:
            backups: list[tuple[Path, Path]] = []
            for path in contract.write_from_history(site, args.runs, margin=margin,
                                                    omitted=omitted, backups=backups):
                print(f"wrote {path}")
            for path, backup in backups:
                print(f"previous {path.name} kept as {backup}")
        if omitted:
            print(contract.omitted_note(site, omitted), file=sys.stderr)
        return 0
    if args.tolerance is None:
        raise InputError("references capture: give --tolerance T (one run) or --from-history")
    if args.margin is not None:
        raise InputError("references capture: --margin goes with --from-history; with "
                         "--tolerance T the band is T around the run's value")
    if args.runs:
        raise InputError("references capture: --runs goes with --from-history; with "
                         "--tolerance T give one run report")
    path = site.references
    existing = None
    if path.exists():
        existing = site.check_references()
        site.load_host_expectations()
    report_path = site.find_report(args.run_report) if args.run_report else latest_report(site)
    report = judged_report(site, report_path)  # a dry run, another site's...: exit 2
    try:
        data = refresolve.capture(report, args.tolerance, existing)
    except ReferencesError as err:
        raise ReferencesError(str(report_path), err.key, err.reason) from None
    header = (f"# References of site {args.site!r}, captured by `hpcval references capture "
              f"--tolerance {args.tolerance}`\n# from {report_path}\n# (host "
              f"{report.session.get('hostname')}, run {report.session.get('time_start')}). "
              "Review before committing.\n# Format: docs/references.md\n\n")
    text = refresolve.dump_references(data, header)
    if not args.write:
        sys.stdout.write(text)
        return 0
    refs.load_references_text(text, path)  # never install a file hpcval itself cannot read
    backup = keep_backup(path)
    if backup is not None:
        print(f"previous references kept as {backup}")
    atomic_write(path, text, "writing references")
    print(f"wrote {path}")
    return 0
