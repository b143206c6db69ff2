"""What a person reads of a run's verdicts: one line per regressed, unstable
or improved figure (:func:`describe`, with how long a change has been
sustained), in ``hpcval report`` one per check with inconclusive figures and
the action that resolves them, then one line of counts (:func:`verdict_text`)."""

from __future__ import annotations

from typing import Any

from hpcval.history.judging import modes
from hpcval.history.judging.change import Change, sig3

#: Outcomes with one terminal line per figure.
LOUD = ("regressed", "unstable", "improved")


def _num(v: Any) -> str:  # the HTML table's numbers (report.py takes them over)
    if not isinstance(v, int | float):
        return "-"
    mag = abs(v)
    return f"{v:,.0f}" if mag >= 1000 else f"{v:.1f}" if mag >= 10 else f"{v:.3g}"


def _pct(v: Any) -> str:
    return f"{100 * v:+.1f} %" if isinstance(v, int | float) else "-"


def describe(case_key: str, variable: str, outcome: str, d: dict[str, Any]) -> str:
    """One line a person reads: what changed, by how much, how sure, which family."""
    unit = d.get("unit", "")
    text = (f"{outcome.upper()} {case_key} {variable}: {sig3(d.get('baseline_median'))} -> "
            f"{sig3(d.get('current_median'))} {unit}".rstrip())
    share = d.get("slow_share")
    grown = d.get("run_spread") if outcome == "unstable" else None
    if isinstance(grown, dict):  # the run-to-run spread grew, the level held
        text += (f", run-to-run spread x{sig3(grown.get('ratio'))} [{sig3(grown.get('low'))} .. "
                 f"{sig3(grown.get('high'))}] since {grown.get('since')}")
    elif outcome == "unstable" and d.get("dispersion") and not isinstance(share, dict):
        disp = d["dispersion"]
        text += (f", within-run spread {sig3(100 * disp['baseline'])} -> "
                 f"{sig3(100 * disp['current'])} % ({sig3(disp['ratio'])}x)")
    change = Change.from_detail(d)
    if change is not None:
        text += f", {change.text()}"
    if d.get("family"):
        text += f", family {d['family']}"
    p = d.get("p_adjusted", d.get("p_value"))
    if (outcome == "unstable" and str(d.get("note", "")).startswith("slow-mode share")) or \
            (outcome == "regressed" and str(d.get("note", "")).startswith("fast mode gone")):
        p = share.get("p", p) if isinstance(share, dict) else p  # the share test's p
    elif isinstance(grown, dict):
        p = grown.get("p", p)  # the spread test's p
    elif outcome == "unstable" and isinstance(d.get("dispersion"), dict):
        p = d["dispersion"].get("p", p)  # the stability test's p, not the change's
    if isinstance(p, int | float):
        text += f", p={p:.2g}"
    if d.get("statistic") == "fast":  # a two-moded figure: its fast mode and slow share
        text += ", fast mode"
        if isinstance(share, dict):
            text += (f", slow-mode share {sig3(100 * share['before'])} -> "
                     f"{sig3(100 * share['now'])} % [{100 * share['low']:+.0f} .. "
                     f"{100 * share['high']:+.0f} points]")
    sus = d.get("sustained")
    if isinstance(sus, dict):
        text += f"; {sustained_text(sus)}"
    return text


def sustained_text(sus: dict[str, Any]) -> str:
    """``sustained since <run> (4 runs, CUSUM 6.2 > 5)``: the figure has stayed
    beyond its old level since that run (called runs included)."""
    runs = sus.get("runs_after")
    cusum, limit = sus.get("cusum"), sus.get("limit")
    extra = f"{runs} runs" if isinstance(runs, int) else ""
    if isinstance(cusum, int | float) and isinstance(limit, int | float):
        extra += f"{', ' if extra else ''}CUSUM {cusum:.1f} > {limit:g}"
    since = sus.get("since")
    head = f"sustained since {since}" if since else "sustained"
    return f"{head} ({extra})" if extra else head


#: The largest threshold an inconclusive line suggests: beyond it the run-to-run
#: spread is no noise around one level but runs jumping between levels (modes),
#: and a threshold that wide would hide every real fault.
SANE_THRESHOLD = modes.SANE_THRESHOLD


def _inconclusive_line(case_key: str, items: list[tuple[str, dict[str, Any]]]) -> str:
    """One line per check with inconclusive figures, with one action a person
    can take: a few more runs (the sustained rule judges them together) when
    that is at most 5; more samples per run when they resolve it; a threshold
    one run resolves when it is a sane one (at most 50 %); else the figure's
    runs jump between levels: judge its fast mode (``statistic: fast`` in
    judging.yaml) or put it in a family with the figures that share its cause.
    The run is held out of the baselines until a person accepts it."""
    names = ", ".join(v for v, _ in items)
    worse = [abs(d["change"]) for _, d in items if isinstance(d.get("change"), int | float)]
    span = (f"{sig3(100 * min(worse))}-{sig3(100 * max(worse))} %" if len(worse) > 1
            else f"{sig3(100 * worse[0])} %" if worse else "beyond the threshold")
    needed = [d.get("needed") or {} for _, d in items]
    runs = [n.get("runs") for n in needed]
    samples = [n.get("samples") for n in needed]
    thr = [n.get("threshold") for n in needed if isinstance(n.get("threshold"), float)]
    if runs and all(isinstance(r, int) for r in runs) and max(runs) <= 5:
        action = (f"{max(runs)} more runs at this level resolve it (the sustained rule "
                  "judges them together)")
    elif samples and all(isinstance(n, int) for n in samples) and max(samples) <= 1000:
        action = (f"{max(samples)} samples per run resolve it (the check's sample count; "
                  "the run-to-run spread allows it)")
    elif thr and max(thr) <= SANE_THRESHOLD:
        action = (f"raise the threshold to {sig3(100 * max(thr))} % in judging.yaml (what one "
                  "run resolves at this noise)")
    elif all(d.get("statistic") == "fast" for _, d in items):
        # the fast mode is judged already: what is left is a person's call on more data
        spread = [d.get("spread") for _, d in items if isinstance(d.get("spread"), float)]
        wide = f" ({sig3(100 * max(spread))} % run to run)" if spread else ""
        action = (f"its fast mode is judged and still moves too much{wide}: more samples "
                  "per run (-S samples=N) show it more often, or group it with the figures "
                  "that share its cause (families: in judging.yaml)")
    else:
        spread = [d.get("spread") for _, d in items if isinstance(d.get("spread"), float)]
        wide = f" ({sig3(100 * max(spread))} % run to run)" if spread else ""
        action = (f"its runs jump between levels{wide}: judge the fast mode "
                  "(figures: {'<glob>': {statistic: fast}} in judging.yaml) or group it "
                  "with the figures that share its cause (families: in judging.yaml)")
    count = f"{len(items)} figure{'s' if len(items) > 1 else ''}"
    return (f"INCONCLUSIVE {case_key}: {count} ({names}) worse by {span} within the noise; "
            f"{action}")


def verdict_text(verdicts: list[tuple[str, str, str, dict[str, Any]]],
                 inconclusive_lines: bool = False) -> str:
    """The history verdicts a person reads after ReFrame's log (docs/judging.md):
    one line per regressed, unstable or improved figure, then one line of counts
    (the only line on a clean run). ``inconclusive_lines`` (``hpcval report``)
    adds one line per check with inconclusive figures and the action that
    resolves them. A validation counts them only: an inconclusive figure is one
    whose noise cannot tell, which one run cannot act on, and which a clean run
    of a noisy figure is often (the sustained rule judges the runs after it
    together)."""
    if not verdicts:
        return ""
    counts: dict[str, int] = {}
    for _, _, outcome, _ in verdicts:
        counts[outcome] = counts.get(outcome, 0) + 1
    order = ["regressed", "unstable", "improved", "warn", "inconclusive", "pass", "no-baseline"]
    summary = ", ".join(f"{counts[o]} {o}" for o in order if o in counts)
    lines = [describe(k, v, o, d) for o_want in LOUD
             for k, v, o, d in verdicts if o == o_want]
    pending: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for k, v, o, d in verdicts:
        if o == "inconclusive":
            pending.setdefault(k, []).append((v, d))
    where = "docs/judging.md"
    if inconclusive_lines:
        lines += [_inconclusive_line(k, items) for k, items in pending.items()]
    elif pending:
        where += "; `hpcval report` says what would resolve the inconclusive"
    return "".join(f"{line}\n" for line in lines) + f"History verdicts: {summary} ({where})\n"
