"""A site's contract from its own history: references and host expectations.

``hpcval references capture --from-history`` and ``hpcval validate --record``
write the site's hard contract from runs it has stored, not from one number
and a guessed tolerance:

- every figure's reference is the median of the selected runs' medians; its
  band is one-sided, on the side that is worse: for a figure where higher is
  better, at least the lowest sample seen times ``(1 - margin)``; where lower
  is better, at most the highest sample seen divided by ``(1 - margin)``. The
  better side stays unbounded (a faster machine never fails its contract).
  With the default margin of 0.5 the band catches gross breakage (half the
  bandwidth of the worst sample ever seen, twice its latency); the history
  verdicts (:mod:`hpcval.run.verdicts`) catch the small regressions;
- host expectations are the settings the host tuning audit found (a setting
  it could not read becomes ``any``).

Both files are written atomically; an existing one is backed up first.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from statistics import median
from typing import Any

import yaml

from hpcval.core.errors import InputError
from hpcval.core.fileio import atomic_write, keep_backup
from hpcval.history.store import Store
from hpcval.site import Site, refresolve
from hpcval.site import references as refs


class NoPassedCase(InputError):
    """The runs asked for hold no passed test case to take references from."""

DEFAULT_MARGIN = 0.5
#: The margin of the bands ``validate --record`` writes from its one run: one run
#: shows the noise within it, not between runs, so its band only catches gross
#: breakage (a quarter of the worst bandwidth sample, four times the worst
#: latency) until ``capture --from-history`` replaces it.
RECORD_MARGIN = 0.75
AUDIT_CHECK = "host_tuning_audit_check"


def _sig(value: float) -> float:
    """``value`` rounded to 4 significant digits (a reviewable YAML)."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, 3 - int(math.floor(math.log10(abs(value)))))


def band(samples_per_run: list[list[float]], better: str, unit: str,
         margin: float = DEFAULT_MARGIN) -> list[Any] | None:
    """``[reference, lower, upper, unit]`` in ReFrame's relative form, or
    ``None`` where the samples allow no meaningful band (no sample, or a
    reference that is not positive)."""
    runs = [r for r in samples_per_run if r]
    if not runs:
        return None
    ref = median(median(r) for r in runs)
    everything = [v for r in runs for v in r]
    if ref <= 0 or min(everything) < 0:
        return None
    if better == "higher":
        bound = min(everything) * (1 - margin)
        return [_sig(ref), _sig(bound / ref - 1), None, unit]
    bound = max(everything) / (1 - margin)
    return [_sig(ref), None, _sig(bound / ref - 1), unit]


def _case_rows(store: Store, runs: list[str] | None) -> list[dict[str, Any]]:
    with store.connect() as conn:
        conn.row_factory = sqlite3.Row
        query = ("SELECT c.run_id, c.case_key, c.check_name, c.params, c.system, c.partition, "
                 "c.environ, c.result FROM cases c JOIN runs r ON r.run_id=c.run_id")
        rows = [dict(r) for r in conn.execute(query + " ORDER BY c.run_id")]
    if runs is not None:
        known = {r["run_id"] for r in store.runs()}
        unknown = [run for run in runs if run not in known]
        if unknown:
            raise InputError(f"{store.path}: no run '{unknown[0]}'; `hpcval history --site "
                             f"{store.path.parent.name}` lists the run ids")
        return [r for r in rows if r["run_id"] in runs]
    accepted = {r["run_id"] for r in store.runs() if r["accepted"]}
    return [r for r in rows if r["run_id"] in accepted]


def references_from_history(site: Site, runs: list[str] | None = None, last: int = 20,
                            margin: float = DEFAULT_MARGIN,
                            omitted: list[str] | None = None) -> dict[str, Any]:
    """References data (as :func:`hpcval.site.refresolve.dump_references` takes) for
    every check in the selected runs (default: the last ``last`` accepted
    runs of each case); entries of checks not in them are kept as they are, and
    so are the cases of a check that the runs did not measure, where the
    check's ``$index`` is unchanged.

    A figure whose samples allow no band (:func:`band`: a reference of zero or
    below, e.g. a cost that is noise around zero) gets none, and a case left
    without any figure is not written; each such figure is appended to
    *omitted* as ``check key/.../variable`` for the caller to report."""
    if not 0 < margin < 1:
        raise InputError(f"--margin {margin}: must be a fraction between 0 and 1")
    store = Store(site.history_db)
    cases = [r for r in _case_rows(store, runs) if r["result"] == "pass"]
    if not cases:
        which = f"runs {', '.join(runs)}" if runs else "accepted runs"
        raise NoPassedCase(f"{site.history_db}: no passed test case in the {which} to take "
                           "references from")
    by_case: dict[str, list[str]] = {}
    info: dict[str, dict[str, Any]] = {}
    for r in cases:
        by_case.setdefault(r["case_key"], []).append(r["run_id"])
        info[r["case_key"]] = r
    partitions = {f"{r['system']}:{r['partition']}" for r in cases}
    out: dict[str, Any] = {}
    if site.references.exists():
        for name, entry in site.load_references().entries.items():
            out[name] = {"$index": list(entry.index), **entry.data} if entry.index \
                else dict(entry.data)
    # per check: (parameter names, index values, figure series) of each measured case
    measured: dict[str, list[tuple[list[str], dict[str, Any], dict[str, Any]]]] = {}
    for key, run_ids in by_case.items():
        c = info[key]
        chosen = set(run_ids[-last:])
        series: dict[str, tuple[str, str, list[list[float]]]] = {}
        for p in store.history(case=key):
            if p.run_id in chosen and p.samples:
                unit_better_runs = series.setdefault(p.variable, (p.unit, p.better, []))
                unit_better_runs[2].append(p.samples)
        if not series:
            continue
        params = json.loads(c["params"])
        values = {"$partition": f"{c['system']}:{c['partition']}", "$environ": c["environ"],
                  **params}
        measured.setdefault(c["check_name"], []).append((list(params), values, series))
    for name, found in measured.items():
        full = (["$partition"] if len(partitions) > 1 else []) + ["$environ", *found[0][0]]
        old = out.get(name)
        old_index = old.get("$index") if isinstance(old, dict) else None
        # the check's own index where it tells the measured cases apart: their
        # entries are replaced, its other cases (a parameter value not run
        # lately) kept; otherwise the whole entry is written anew
        keys = ({tuple(str(v[a]) for a in old_index) for _, v, _ in found}
                if old_index and all(a in v for _, v, _ in found for a in old_index)
                else set())
        if old_index and len(keys) == len(found):
            index = list(old_index)
        else:
            index = full
            out[name] = {"$index": index}
        for _, values, series in found:
            path = [out[name]]
            for attr in index:
                path.append(path[-1].setdefault(_yaml_key(values[attr]), {}))
            where = "/".join([name, *(str(values[attr]) for attr in index)])
            for variable, (unit, better, per_run) in sorted(series.items()):
                b = band(per_run, better, unit, margin)
                if b is not None:
                    path[-1][variable] = b
                elif omitted is not None:
                    omitted.append(f"{where}/{variable}")
            # a case without any band is no entry (an empty mapping is no valid file)
            keys = [_yaml_key(values[attr]) for attr in index]
            for depth in range(len(keys), 0, -1):
                if path[depth]:
                    break
                del path[depth - 1][keys[depth - 1]]
        if set(out[name]) <= {"$index"}:
            del out[name]
    return out


def omitted_note(site: Site, omitted: list[str]) -> str:
    """What to do about the figures :func:`references_from_history` gave no band."""
    return (f"{site.references}: no band for {len(omitted)} figure(s) with samples at or "
            f"below zero: {', '.join(omitted)}; write their references by hand "
            "(docs/references.md; a reference of 0 takes absolute bounds), else validate "
            "fails them for a missing reference")


def _yaml_key(value: Any) -> Any:
    """A parameter value as the references file keys it (ints stay ints)."""
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return value


def host_expectations_from_run(site: Site, run_id: str) -> dict[str, Any] | None:
    """Host expectations from the audit check of a stored run, or ``None``
    when the run had no audit."""
    from hpcval.core.errors import HpcvalError
    from hpcval.history.runreport import load_run_report
    from hpcval.node.audit import parse_audit_output

    report = load_run_report(site.report_path(run_id))
    for case in report.cases:
        if case.check != AUDIT_CHECK:
            continue
        for d in (case.outputdir, case.stagedir):
            stdout = Path(d or "") / str(case.raw.get("job_stdout") or "")
            if d and stdout.is_file():
                try:
                    findings = parse_audit_output(stdout.read_text(errors="replace"),
                                                  str(stdout))
                except HpcvalError:
                    return None
                return {f.setting: ("any" if f.found is None else f.found) for f in findings}
    return None


def write_from_history(site: Site, runs: list[str] | None = None,
                       margin: float = DEFAULT_MARGIN,
                       omitted: list[str] | None = None,
                       backups: list[tuple[Path, Path]] | None = None) -> list[Path]:
    """Write references (and, from a run with an audit, host expectations);
    figures that got no band are appended to *omitted*
    (:func:`references_from_history`), each file replaced and the copy kept
    of it to *backups* (file, backup)."""
    kept = [] if backups is None else backups
    written = []
    data = references_from_history(site, runs, margin=margin, omitted=omitted)
    source = f"runs {', '.join(runs)}" if runs else "the site's accepted runs"
    header = (f"# References of site {site.name!r} from {source}, written by hpcval.\n"
              f"# Reference: median of the runs' medians. Band: one-sided, the worst sample "
              f"seen with a margin of {margin:g}\n# (docs/references.md). Review before "
              "committing.\n\n")
    text = refresolve.dump_references(data, header)
    refs.load_references_text(text, site.references)  # never install what hpcval can't read
    backup = keep_backup(site.references)
    if backup is not None:
        kept.append((site.references, backup))
    written.append(atomic_write(site.references, text, "writing references"))
    if runs:
        expectations = host_expectations_from_run(site, runs[-1])
        if expectations is not None:
            body = yaml.safe_dump(expectations, sort_keys=True, default_flow_style=False)
            backup = keep_backup(site.host_expectations)
            if backup is not None:
                kept.append((site.host_expectations, backup))
            written.append(atomic_write(
                site.host_expectations,
                f"# Host settings of site {site.name!r} as found by the audit of run "
                f"{runs[-1]}.\n# Loosen what may vary ({{min: N}}, {{one_of: [...]}}, any): "
                "docs/checks.md.\n" + body, "writing host expectations"))
    return written
