"""``hpcval history``: the stored runs of a site and their figures."""

from __future__ import annotations

import argparse
import json
import time
from statistics import median

from hpcval.core.errors import InputError
from hpcval.core.fileio import atomic_write
from hpcval.history.judging.change import Change
from hpcval.history.runsets import run_tags
from hpcval.history.store import Store, verdicts_path
from hpcval.site import Site


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "history", help="list a site's stored runs, or one figure across them",
        description="Without --check/--figure: one line per stored run (id, time, result, "
        "accepted into baselines). With them: every stored value of the matching figures, "
        "run by run, with the number of samples, spread and verdict. --accept/--reject mark "
        "a run as (not) part of future baselines, e.g. to accept a machine's new level after "
        "a planned change, or a run held out of baselines (a figure moved by the "
        "judging.yaml hold_factor, or inconclusive).")
    p.add_argument("--site", default="local")
    p.add_argument("--check", help="a check name (e.g. imb_pingpong_check)")
    p.add_argument("--figure", help="a performance variable (e.g. bw_1MiB)")
    p.add_argument("--last", type=int, default=30, help="at most this many runs (default 30)")
    p.add_argument("--json", action="store_true", help="print JSON")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--accept", metavar="RUN_ID", help="count this run in baselines")
    g.add_argument("--reject", metavar="RUN_ID", help="leave this run out of baselines")
    p.set_defaults(func=_run)


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "-"


#: The reason recorded for a run a person left out that was not held.
REJECTED_BY_PERSON = "left out by a person (hpcval history --reject)"


def _mark(site: Site, store: Store, run_id: str, accepted: bool) -> int:
    result = next((r["result"] for r in store.runs() if r["run_id"] == run_id), None)
    if accepted and result in ("interrupted", "orphaned"):
        raise InputError(f"run {run_id}: {result} before it finished; an {result} run "
                         "never counts in baselines (run the validation again)")
    store.set_accepted(run_id, accepted)
    hold = store.holds().get(run_id)
    if hold is not None and hold.get("reasons") == [REJECTED_BY_PERSON]:
        # a run only a person had left out, accepted again: no level starts there
        hold = {**hold, "state": "rejected" if not accepted else "cleared"}
        store.set_hold(run_id, hold)
    elif hold is not None:  # a person decided: held runs wait for this
        hold = {**hold, "state": "accepted" if accepted else "rejected"}
        store.set_hold(run_id, hold)
    elif not accepted:  # kept, so that the sustained rule leaves the run out too
        hold = {"state": "rejected", "reasons": [REJECTED_BY_PERSON]}
        store.set_hold(run_id, hold)
    path = verdicts_path(site.report_path(run_id))
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data["accepted"] = accepted
    if hold is not None:
        data["held"] = hold
    atomic_write(path, json.dumps(data, indent=1, default=str), "recording the acceptance")
    print(f"run {run_id}: {'accepted into' if accepted else 'left out of'} baselines"
          + (" (it was held: a new level starts here)" if hold is not None and accepted
             else ""))
    return 0


def _out_note(accepted: bool, held: bool) -> str:
    if accepted:
        return ""
    return "  (held)" if held else "  (not in baselines)"


def _accepted(run: dict, hold: dict | None) -> str:
    """The history list's last column: yes, no, held (waiting for a person)."""
    if hold is not None and hold.get("state") == "held":
        return "held: " + "; ".join(hold.get("reasons", []))
    if hold is not None and hold.get("state") == "outlier":
        return f"no (held; run {hold.get('confirmed_by')} is at the old level)"
    return "yes" if run["accepted"] else "no"


def _run(args: argparse.Namespace) -> int:
    site = Site.load(args.site)
    store = Store(site.history_db)
    if args.accept is not None or args.reject is not None:
        flag, run_id = ("--accept", args.accept) if args.accept is not None else (
            "--reject", args.reject)
        if not run_id.strip():
            raise InputError(f"history {flag} {run_id!r}: give a run id (see `hpcval history "
                             f"--site {site.name}`)")
        if args.check or args.figure:
            raise InputError("history: --accept/--reject mark a whole run; give them "
                             "without --check/--figure")
        return _mark(site, store, run_id, args.accept is not None)
    if args.last < 1:
        raise InputError(f"--last {args.last}: must be at least 1")
    if not args.check and not args.figure:
        runs = store.runs()[-args.last:]
        if args.json:
            holds = store.holds()
            print(json.dumps([{**r, "tags": run_tags(r), "held": holds.get(r["run_id"])}
                              for r in runs], indent=1))
            return 0
        print(f"{'run':26}  {'started':16}  {'result':11}  accepted (tags last)")
        holds = store.holds()
        for r in runs:
            tags = " ".join(f"{k}={v}" for k, v in sorted(run_tags(r).items()))
            print(f"{r['run_id']:26}  {_when(r['started']):16}  {r['result']:11}  "
                  f"{_accepted(r, holds.get(r['run_id']))}" + (f"  tags: {tags}" if tags else ""))
        print(f"{len(runs)} run(s) in {site.history_db}")
        return 0
    points = store.history(check=args.check, variable=args.figure)
    if not points:
        raise InputError(f"{site.history_db}: no stored figure matches "
                         f"--check {args.check or '*'} --figure {args.figure or '*'}")
    keep = {p.run_id for p in points}
    keep = set(sorted(keep)[-args.last:])
    points = [p for p in points if p.run_id in keep]
    verdicts = {run: store.verdicts(run) for run in keep}
    if args.json:
        print(json.dumps([{**p.__dict__, "verdict": verdicts[p.run_id].get(
            (p.case_key, p.variable), (None, {}))[0]} for p in points], indent=1))
        return 0
    held = {r for r, h in store.holds().items() if h.get("state") == "held"}
    for key in sorted({(p.case_key, p.variable) for p in points}):
        series = [p for p in points if (p.case_key, p.variable) == key]
        print(f"{key[0]}  {key[1]} [{series[0].unit}, {series[0].better} is better]")
        for p in series:
            spread = (max(p.samples) - min(p.samples)) / median(p.samples) * 100 \
                if p.samples and median(p.samples) else 0.0
            verdict, detail = verdicts[p.run_id].get(key, ("-", {}))
            change = Change.from_detail(detail)
            if change is not None:
                verdict += f" {change.text()}"
            value = f"{p.value:.4g}" if p.value is not None else "-"
            print(f"  {p.run_id:26}  {_when(p.started):16}  {value:>10}"
                  f"  n={len(p.samples):<3} spread {spread:5.1f} %  band {p.band_result or '-':4}"
                  f"  {verdict}{_out_note(p.accepted, p.run_id in held)}")
    return 0
