"""``hpcval references``: validate a site's references, capture new ones."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from hpcval import references as refs
from hpcval.errors import ReferencesError
from hpcval.paths import site_dir
from hpcval.report import load_run_report
from hpcval.runner import check_site_references, latest_report


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("references", help="check or capture a site's references")
    rsub = p.add_subparsers(dest="action", metavar="ACTION")
    rsub.required = True

    c = rsub.add_parser("check", help="validate site-configs/<site>/references.yaml",
                        description="Validate the site's references against the checks in "
                        "reframe-checks/: structure, numbers, thresholds, check names.")
    c.add_argument("--site", default="local")
    c.set_defaults(func=_check)

    cap = rsub.add_parser(
        "capture", help="write references from a stored run's measured values",
        description="Turn the figures of a run report into references "
        "[value, -tolerance, +tolerance, unit]. Prints the YAML, or with --write replaces the "
        "site's references.yaml (the old file is kept as references.yaml.<time>.bak).")
    cap.add_argument("--site", default="local")
    cap.add_argument("--tolerance", type=float, required=True,
                     help="allowed relative deviation, e.g. 0.2 for +-20%%")
    cap.add_argument("--write", action="store_true", help="replace the site's references file")
    cap.add_argument("run_report", nargs="?", type=Path,
                     help="ReFrame JSON run report (default: the site's latest)")
    cap.set_defaults(func=_capture)


def _check(args: argparse.Namespace) -> int:
    ref_file = check_site_references(args.site)
    n = len(ref_file.entries)
    print(f"{ref_file.path}: OK ({n} check{'s' if n != 1 else ''}: "
          f"{', '.join(sorted(ref_file.entries))})")
    return 0


def _capture(args: argparse.Namespace) -> int:
    path = site_dir(args.site) / refs.REFERENCES_FILE
    existing = check_site_references(args.site) if path.exists() else None
    report_path = args.run_report or latest_report(args.site)
    report = load_run_report(report_path)
    try:
        data = refs.capture(report, args.tolerance, existing)
    except ReferencesError as err:
        raise ReferencesError(str(report_path), err.key, err.reason) from None
    header = (f"# References of site {args.site!r}, captured by `hpcval references capture "
              f"--tolerance {args.tolerance}`\n# from {report_path}\n# (host "
              f"{report.session.get('hostname')}, run {report.session.get('time_start')}). "
              "Review before committing.\n# Format: docs/references.md\n\n")
    text = refs.dump_references(data, header)
    if not args.write:
        sys.stdout.write(text)
        return 0
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    refs.load_references(tmp)  # never install a file hpcval itself cannot read
    if path.exists():
        backup = path.with_name(f"{path.name}.{time.strftime('%Y%m%dT%H%M%S')}.bak")
        shutil.copy2(path, backup)
        print(f"previous references kept as {backup}")
    os.replace(tmp, path)
    print(f"wrote {path}")
    return 0
