"""Holds: a run that regressed nothing but moved a figure by the site's
``hold_factor``, or left one inconclusive that one run cannot resolve, is held
out of the baselines until a person accepts it or a later run at the old
level decides it (then an ``outlier``). The run's saved verdicts file
(``var/<site>/verdicts/<run id>.json``, what ``store rebuild`` reads) records
the hold."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcval.core.fileio import atomic_write
from hpcval.history.judging.change import Change
from hpcval.history.store import Store, verdicts_path
from hpcval.site import Site


def _verdicts_file(site: Site, run_id: str) -> Path:
    return verdicts_path(site.report_path(run_id))


def figure_name(case_key: str, variable: str) -> str:
    """The name judging settings match their globs on:
    ``<check> [%param=value...]@<system>:<partition>+<environ>/<variable>``."""
    return f"{case_key}/{variable}"


#: An ``improved`` figure whose one-sided p is at most this (t beyond about 4.3
#: with 30 runs of history: a clean run in about 1 of 10,000) holds its run: an
#: extreme improvement is as suspicious as an extreme loss (a broken timer, a
#: benchmark that skipped work) and must not lift the level of the runs after it.
EXTREME_P = 1e-4


def hold_reasons(verdicts: list[tuple[str, str, str, dict[str, Any]]], settings: Any
                 ) -> list[tuple[str, tuple[str, str]]]:
    """Why a run that regressed nothing is still not accepted automatically
    (:func:`hpcval.history.judging.modes.hold_reason`): a figure that moved by
    the site's ``hold_factor`` (2x by default) either way, one inconclusive
    where one run cannot resolve even 50 %, or one ``improved`` beyond
    :data:`EXTREME_P`. Returns ``(reason, (case key,
    variable))``."""
    from hpcval.history.judging.modes import hold_reason

    out = []
    for case_key, variable, outcome, d in verdicts:
        fs = settings.for_figure(figure_name(case_key, variable))
        change = Change.from_detail(d)
        thr = (d.get("needed") or {}).get("threshold")
        within = isinstance(d.get("within_accepted"), dict)
        # a run whose median the accepted runs have held already (moved far, or
        # too noisy to resolve, or without a fast level) is what they are:
        # held only where it lies beyond them
        why = None if within else hold_reason(
            outcome, change.change if change else None,
            thr if isinstance(thr, int | float) else None, fs.hold_factor)
        p = d.get("p_value")
        if why is None and outcome == "improved" and isinstance(p, int | float) \
                and p <= EXTREME_P:
            # as far beyond the noise as a run the spread leaves out as an outlier:
            # a person decides, as for an extreme loss (which is `regressed`)
            why = f"improved {change.text() if change else ''} (p={p:.2g}): held like a loss"
        follows = d.get("follows")
        if why is None and outcome == "inconclusive" and isinstance(follows, dict):
            # worse than the level, within a dependent level's wander from the
            # called runs before it: a wander that goes on, or a cut that stays
            why = (f"follows the called run {follows.get('after')} "
                   f"(lag-1 correlation {follows.get('rho', 0):.2f}): a wander or a cut "
                   "that stays")
        share = d.get("slow_share")
        if why is None and outcome == "inconclusive" and change is None \
                and isinstance(share, dict) and not within:
            # no fast level, the share leaning to a vanished mode (judging.verdict)
            why = (f"has no fast level: slow-mode share {share.get('now', 0):.0%} against "
                   f"{share.get('before', 0):.0%} before (p={share.get('p', 1):.2g})")
        if why is not None:
            out.append((f"{variable} {why}", (case_key, variable)))
    return out


def _held_text(site: Site, run_id: str, hold: dict[str, Any] | None) -> str:
    if hold is None:
        return ""
    return (f"HELD run {run_id}: not accepted into baselines ({'; '.join(hold['reasons'])}); "
            f"`hpcval history --site {site.name} --accept {run_id}` accepts it as the new "
            "level, a run at the old level leaves it out\n")


def _release_holds(site: Site, store: Store, holds: Mapping[str, dict[str, Any]],
                   run_id: str, verdicts: list[tuple[str, str, str, dict[str, Any]]]
                   ) -> list[str]:
    """Held runs this run decides: each held figure of theirs judged ``pass`` here
    (against the baselines they are not in) is the old level confirmed; the held
    run stays out of baselines for good (state ``outlier``)."""
    released = released_by(holds, run_id, verdicts)
    for held_id in released:
        new = {**holds[held_id], "state": "outlier", "confirmed_by": run_id}
        store.set_hold(held_id, new)
        _update_saved(site, held_id, held=new)
    return released


def released_by(holds: Mapping[str, dict[str, Any]], run_id: str,
                verdicts: list[tuple[str, str, str, dict[str, Any]]]) -> list[str]:
    """The held runs this run's verdicts decide (each held figure of theirs
    judged ``pass`` here): what :func:`_release_holds` marks ``outlier``."""
    now = {(k, v): o for k, v, o, _ in verdicts}
    released = []
    for held_id, hold in holds.items():
        figs = [tuple(f) for f in hold.get("figures", []) if isinstance(f, list) and len(f) == 2]
        if hold.get("state") != "held" or held_id == run_id or not figs:
            continue
        if all(now.get(f) == "pass" for f in figs):
            released.append(held_id)
    return released


def _update_saved(site: Site, run_id: str, **values: Any) -> None:
    """Change keys of a run's verdicts file (what ``store rebuild`` reads)."""
    path = _verdicts_file(site, run_id)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data.update(values)
    atomic_write(path, json.dumps(data, indent=1, default=str), "recording the hold")
