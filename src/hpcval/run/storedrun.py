"""Which run report a reader may show as a verdict: a run of this site that
hpcval stored and judged.

``hpcval report`` and ``hpcval references capture`` read a run report named
on the command line or the site's latest. Only a run ``hpcval validate``
stored for this site has a verdict; these are refused (exit 2, saying what
the report is) and never become the latest run or page:

- a dry run (``reframe --dry-run``): nothing was measured;
- a run of another site (its report names another site's ReFrame config):
  judged against this site's history it would say nothing true;
- a run hpcval never stored (a plain ``reframe -C site-configs/<site>/config.py``
  run writes its report into the store too, but nothing judges it);
- an orphaned run: hpcval died while its benchmarks ran, nothing judged it.

Exit codes: :mod:`hpcval.core.errors`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hpcval.core.errors import HpcvalError, InputError
from hpcval.history.records import run_reports, verdicts_path
from hpcval.history.runreport import RunReport, load_run_report
from hpcval.site import Site

#: at most this many reports passed over are named, one line each
NAMED_SKIPS = 5


def run_id_of(path: Path) -> str:
    return path.stem.removeprefix("run-report-")


def stored_result(site: Site, run_id: str, stored_runs: dict[str, str] | None = None
                  ) -> str | None:
    """The result hpcval stored for run *run_id* of *site* (``pass``,
    ``regressed``, ``orphaned``...), ``None`` when hpcval never stored it: from
    ``verdicts/<run id>.json``, else from the results store (*stored_runs*,
    run id -> result, read once by the caller)."""
    path = verdicts_path(site.report_path(run_id))
    if path.is_file():
        try:
            data: Any = json.loads(path.read_text())
            return str(data.get("result") or "stored") if isinstance(data, dict) else "stored"
        except (OSError, ValueError):
            return "stored"  # written by hpcval, unreadable now: the store decides below
    if stored_runs is None:
        stored_runs = _stored_runs(site)
    return stored_runs.get(run_id)


def _stored_runs(site: Site) -> dict[str, str]:
    if not site.history_db.exists():
        return {}
    from hpcval.history.store import Store

    return {r["run_id"]: str(r["result"]) for r in Store(site.history_db).runs()}


def refusal(site: Site, path: Path, report: RunReport | None,
            stored_runs: dict[str, str] | None = None) -> str | None:
    """Why the run of *path* has no verdict on *site* (one line for the user),
    or ``None`` when it is a run hpcval stored and judged for the site."""
    name = site.name
    if report is not None and report.dry_run:
        return (f"{path}: a dry run (`reframe --dry-run`): nothing was measured, there is "
                f"nothing to judge; run `hpcval validate --site {name}`")
    config = report.config_file if report is not None else None
    if config is not None and Path(config).parent.name != name:
        other = Path(config).parent.name
        return (f"{path}: a run of site '{other}' (made with {config}), not of site "
                f"'{name}': its figures are judged only against its own site's history "
                f"(`hpcval report --site {other}`)")
    run_id = run_id_of(path)
    result = stored_result(site, run_id, stored_runs)
    if result is None:
        return (f"{path}: run {run_id} was never stored or judged by hpcval on site "
                f"'{name}' (a plain `reframe` run, or one hpcval died or failed before "
                f"storing): only runs of `hpcval validate --site {name}` have a verdict")
    if result == "orphaned":
        return (f"{path}: run {run_id} is orphaned: hpcval died while its benchmarks ran and "
                "nothing judged it (its figures stay in the report, never in a verdict); "
                f"run `hpcval validate --site {name}` for a verdict")
    return None


def judged_report(site: Site, path: Path) -> RunReport:
    """The run report at *path*, read, when it is a run hpcval judged for
    *site*; else :class:`InputError` (exit 2) saying what it is."""
    report = load_run_report(path)
    why = refusal(site, path, report)
    if why is not None:
        raise InputError(why)
    return report


def _started(path: Path) -> float:
    try:
        data = json.loads(path.read_bytes())
        return float(data["session_info"].get("time_start_unix") or 0)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return 0.0


def _newest_first(reports: list[Path]) -> list[Path]:
    """Run reports by name, newest first; runs started in the same second
    (their ids differ in a random suffix only) by the start time in them."""
    def by_start(group: list[Path]) -> list[Path]:
        return sorted(group, key=_started, reverse=True) if len(group) > 1 else group

    ordered: list[Path] = []
    group: list[Path] = []
    for path in reversed(reports):
        if group and run_id_of(path)[:16] != run_id_of(group[0])[:16]:
            ordered += by_start(group)
            group = []
        group.append(path)
    return ordered + by_start(group)


def latest_report(site: Site, quiet: bool = False) -> Path:
    """The newest run report of *site* that hpcval stored and judged. Newer
    ones that are not (cut short by a full disk, dry runs, plain ReFrame runs,
    orphaned runs) are passed over and, unless *quiet*, named on standard
    error."""
    passed_over: list[str] = []
    stored_runs: dict[str, str] | None = None
    try:
        for path in _newest_first(run_reports(site.reports_dir)):
            # a report cut short (0 bytes, half a JSON document: a disk that
            # filled as it was written) never becomes the latest
            try:
                if path.stat().st_size == 0:
                    raise ValueError("empty")
                json.loads(path.read_bytes())
            except (OSError, ValueError):
                passed_over.append(f"{path}: empty or cut short (a disk that filled?)")
                continue
            if stored_runs is None and not verdicts_path(path).is_file():
                stored_runs = _stored_runs(site)  # read once, only when needed
            try:
                why = refusal(site, path, load_run_report(path), stored_runs)
            except HpcvalError as err:
                why = str(err)
            if why is None:
                return path
            passed_over.append(why)
    finally:
        for why in [] if quiet else passed_over[:NAMED_SKIPS]:
            print(f"hpcval: passed over, not the latest run: {why}", file=sys.stderr)
        if len(passed_over) > NAMED_SKIPS and not quiet:
            print(f"hpcval: and {len(passed_over) - NAMED_SKIPS} more run report(s) passed "
                  "over", file=sys.stderr)
    raise InputError(f"{site.reports_dir}: no run stored and judged by hpcval yet; run "
                     f"`hpcval validate --site {site.name}` first")
