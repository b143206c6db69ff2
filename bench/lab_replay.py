"""Replay a lab store of ``bench/lab_delay.sh cut`` through validate's decision.

The runs tagged ``phase=baseline`` are the accepted history, as the store holds
them (``SPAN=1``: recorded with ``validate --record``, unjudged); every other run
is judged again in the order it ran by :func:`hpcval.run.decide.decide`, the
function ``store_and_judge`` calls (the window, ``judge_run``, transients, the
sustained rule, the spread test, holds), and kept as the store would keep it
(accepted or not, its hold; held runs a later run decides become outliers). The
same samples, the code of today: what the lab's repeats would have printed.

    .venv/bin/python bench/lab_replay.py VAR_DIR/lab/history.sqlite

Prints one line per judged run (the phase's run number, accepted, held, the
figures a person would read above the counts line) and how many clean repeats
print only the counts line.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys

from hpcval.history.judging import JudgingSettings
from hpcval.history.records import CaseRecord, FigureRecord, HistoryPoint
from hpcval.run.decide import decide
from hpcval.run.holds import released_by

#: outcomes that print a line of their own above the counts line
LOUD = ("regressed", "unstable", "improved")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", help="the lab site's history.sqlite")
    args = ap.parse_args()
    conn = sqlite3.connect(f"file:{args.store}?mode=ro", uri=True)
    runs = [(r, json.loads(p).get("tags", {}).get("phase", ""))
            for r, p in conn.execute("SELECT run_id, provenance FROM runs ORDER BY rowid")]
    figs: dict[str, list[tuple]] = {}
    for row in conn.execute("SELECT run_id, case_key, variable, unit, better, value, samples "
                            "FROM figures"):
        figs.setdefault(row[0], []).append((*row[1:6], json.loads(row[6])))
    settings = JudgingSettings()
    hist: dict[tuple[str, str], list[HistoryPoint]] = {}
    holds: dict[str, dict] = {}
    count: dict[str, int] = {}
    only = clean = 0
    for run_id, phase in runs:
        accepted, result = True, "pass"
        if phase != "baseline":
            by_case: dict[str, list[FigureRecord]] = {}
            for case, var, unit, better, value, samples in figs.get(run_id, []):
                by_case.setdefault(case, []).append(FigureRecord(var, unit, better, value,
                                                                 samples))
            cases = [CaseRecord(k, "lab", {}, "lab", "lab", "env", "", "", "", "pass", None,
                                None, v) for k, v in by_case.items()]
            d = decide(settings, run_id, cases, hist, holds)
            accepted, result = d.accepted, d.result
            if d.hold is not None:
                holds[run_id] = d.hold
            else:
                for held in released_by(holds, run_id, d.verdicts):
                    holds[held] = {**holds[held], "state": "outlier", "confirmed_by": run_id}
            count[phase] = count.get(phase, 0) + 1
            lines = [f"{o.upper()} {v}: {det.get('note', '')}" for _, v, o, det in d.verdicts
                     if o in LOUD]
            if d.hold is not None:
                lines.append(f"HELD ({'; '.join(d.hold['reasons'])})")
            if phase == "clean":
                clean += 1
                only += not lines
            print(f"{phase}-{count[phase]}: accepted {'yes' if accepted else 'no'}, "
                  f"{'counts line only' if not lines else f'{len(lines)} line(s)'}")
            for line in lines:
                print(f"   {line[:160]}")
        for case, var, unit, better, value, samples in figs.get(run_id, []):
            hist.setdefault((case, var), []).append(HistoryPoint(
                run_id, None, accepted, case, var, unit, better, value, samples, None,
                run_result=result))
    print(f"clean repeats printing only the counts line: {only} of {clean}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
