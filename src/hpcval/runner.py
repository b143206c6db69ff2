"""Running ReFrame against a site and turning the run into a verdict.

``hpcval validate`` and scheduled validation both come through here: check
the site's references before spending time on benchmarks, run ReFrame with a
report file in the site's results store, print the verdict table, write the
HTML report, and return non-zero on any failure.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hpcval import references as refs
from hpcval.errors import HpcvalError, SiteError
from hpcval.paths import project_root, site_dir, var_dir
from hpcval.report import RunReport, load_run_report, verdict_table, write_html


@dataclass
class Outcome:
    """What one validation run produced."""

    exit_code: int
    report: RunReport | None
    html: Path | None
    reframe_exit_code: int


def reframe_command() -> list[str]:
    """ReFrame from the Python environment that runs hpcval."""
    beside = Path(sys.executable).parent / "reframe"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("reframe")
    if found is None:
        raise HpcvalError("reframe not found: install hpcval's dependencies (make setup)")
    return [found]


def site_config(site: str, root: Path | None = None) -> Path:
    path = site_dir(site, root) / "config.py"
    if not path.is_file():
        raise SiteError(f"{path}: site has no ReFrame configuration (config.py)")
    return path


def check_site_references(site: str, root: Path | None = None) -> refs.ReferencesFile:
    """Validate a site's references file against the checks in the tree."""
    root = root or project_root()
    return refs.check_site_files(site_dir(site, root), root / "reframe-checks")


def latest_report(site: str, root: Path | None = None) -> Path:
    reports = sorted((var_dir(site, root) / "reports").glob("*.json"),
                     key=lambda p: p.stat().st_mtime)
    if not reports:
        raise HpcvalError(f"{var_dir(site, root) / 'reports'}: no run reports yet; run "
                          f"`hpcval validate --site {site}` first")
    return reports[-1]


def publish(report_path: Path, site: str, root: Path | None = None,
            out=sys.stdout) -> tuple[RunReport, Path]:
    """Print the verdict of a stored run and write its HTML report."""
    report = load_run_report(report_path)
    print(verdict_table(report), file=out)
    html_dir = var_dir(site, root) / "html"
    html = write_html(report, html_dir / f"{report_path.stem}.html")
    latest = html_dir / "latest.html"
    tmp = html_dir / ".latest.html.tmp"
    shutil.copyfile(html, tmp)
    tmp.replace(latest)
    print(f"HTML report: {html}", file=out)
    print(f"Run report:  {report_path}", file=out)
    return report, html


def validate(site: str, reframe_args: list[str] | None = None,
             root: Path | None = None, out=sys.stdout) -> Outcome:
    """Run every check on ``site`` (or those ``reframe_args`` select)."""
    root = root or project_root()
    config = site_config(site, root)
    check_site_references(site, root)
    reports = var_dir(site, root) / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    report_path = reports / f"run-report-{stamp}.json"
    cmd = [*reframe_command(), "-C", str(config), "-c", str(root / "reframe-checks"), "-R",
           "-r", "--report-file", str(report_path), *(reframe_args or [])]
    print("+ " + " ".join(cmd), file=out, flush=True)
    rc = subprocess.call(cmd, cwd=root)
    if not report_path.is_file():
        print(f"hpcval: reframe exited with {rc} and wrote no run report ({report_path}); "
              f"see {var_dir(site, root) / 'reframe.log'}", file=sys.stderr)
        return Outcome(rc or 1, None, None, rc)
    report, html = publish(report_path, site, root, out)
    if not report.cases:
        print("hpcval: no check ran: nothing selected for this site "
              "(check the site's environments and the options given)", file=sys.stderr)
        return Outcome(1, report, html, rc)
    failed = bool(report.failures) or rc != 0
    return Outcome(1 if failed else 0, report, html, rc)
