"""``hpcval tune collectives``: tuned Intel MPI collective settings from a
stored sweep (``imb_collective_sweep_check``)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml

from hpcval.core.errors import HpcvalError
from hpcval.core.fileio import atomic_write, keep_backup
from hpcval.node import tuning
from hpcval.reporting.report import load_run_report
from hpcval.run.runner import latest_report
from hpcval.site import TUNING_FILE, Site

SWEEP_CHECK = "imb_collective_sweep_check"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="tuned MPI settings from stored sweeps")
    tsub = p.add_subparsers(dest="what", metavar="WHAT")
    tsub.required = True
    c = tsub.add_parser(
        "collectives",
        help="best Intel MPI collective algorithm per message-size band",
        description=f"Read the {SWEEP_CHECK} results of a stored run (default: the site's "
        "latest), print the fastest preset per size band and the I_MPI_ADJUST_* settings; "
        f"--write stores them in site-configs/<site>/{TUNING_FILE}, where "
        "imb_tuned_collectives_check verifies them.")
    c.add_argument("--site", default="local")
    c.add_argument("--write", action="store_true", help="write the site's tuned settings")
    c.add_argument("run_report", nargs="?", type=Path)
    c.set_defaults(func=_collectives)


def sweep_results(report_path: Path) -> list[dict]:
    report = load_run_report(report_path)
    results = []
    for case in report.cases:
        if case.check != SWEEP_CHECK or case.result != "pass":
            continue
        for d in (case.outputdir, case.stagedir):
            if d and (Path(d) / "hpcval-tuning.json").is_file():
                results.append(json.loads((Path(d) / "hpcval-tuning.json").read_text()))
                break
    if not results:
        raise HpcvalError(f"{report_path}: no passed {SWEEP_CHECK} in this run; run "
                          f"`hpcval validate -- -n {SWEEP_CHECK}` first")
    return results


def _collectives(args: argparse.Namespace) -> int:
    report_path = args.run_report or latest_report(Site.load(args.site))
    results = sweep_results(report_path)
    for r in results:
        print(f"{r['collective']} at {r['ranks']} rank(s) on {r['nodes']} node(s), "
              f"{len(r['algorithms']) - 1} presets swept:")
        print(f"  {'sizes [B]':>24}  {'preset':>6}  {'best [us]':>10}  {'default [us]':>12}  gain")
        for b in r["bands"]:
            print(f"  {b['lo']:>11}-{b['hi']:<12}  {b['algorithm']:>6}  {b['best_us']:>10.2f}  "
                  f"{b['default_us']:>12.2f}  {b['gain_pct']:+.1f} %")
        print(f"  export {r['variable']}=\"{r['setting']}\"\n")
    if not args.write:
        return 0
    path = Site.load(args.site).tuning
    data = {r["collective"]: {"variable": r["variable"], "setting": r["setting"],
                              "ranks": r["ranks"], "nodes": r["nodes"]} for r in results}
    header = (f"# Tuned Intel MPI collective settings of site {args.site!r}, written by "
              f"`hpcval tune collectives`\n# from {report_path} on "
              f"{time.strftime('%Y-%m-%d %H:%M')}. Valid for the ranks and nodes given;\n"
              "# imb_tuned_collectives_check verifies them against the default.\n")
    text = header + yaml.safe_dump(data, sort_keys=False)
    tuning.load_tuning_text(text, path)  # never install a file hpcval itself cannot read
    keep_backup(path)
    atomic_write(path, text)
    print(f"wrote {path}")
    return 0
