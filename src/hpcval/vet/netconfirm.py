"""Confirm before naming, for the network: a node or link is named on pairs
measured twice, not on one measurement.

A pair's 5 samples share their minute of load, and a node's 7 planned pairs
their round's moments: one low measurement can be luck. The first judging of
the planned rounds only makes suspects; the follow-up rounds measure them
again (:func:`hpcval.vet.campaign.run`), and the judging after them names

- a **node** only where the first judging named it *and* its pairs with fresh
  healthy peers in the follow-up rounds are low too (their median worse than
  the healthy pairs' median by half the figure's ``min_effect``): a node that
  is low only with its planned peers, or named for the first time after the
  follow-up (its score moved by a few new pairs), is not named, and its low
  pairs are judged as links (such a link is named on its one measurement:
  the follow-up measured its end instead);
- a **link** only where its pair was measured again: low in the judging after
  the follow-up, or worse than the healthy pairs' median by ``min_effect``
  in both measurements with its second-best samples of the two worse by
  twice ``min_effect`` (their geometric mean): two independent large losses,
  a half-rate link
  among pairs that spread too widely for the robust z score to call one
  measurement off; a few dipped samples, which pull a median of 5 down,
  leave the second-best sample.
  A pair first judged worse than twice ``min_effect`` but not off
  (:func:`doubtful`) is measured again in the follow-up rounds for that
  reason.

What this assumes: a fault lasts over the minutes between the measurements,
and a healthy pair's or node's luck in one measurement is independent of its
luck in the next.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from hpcval.vet.judge import PAIR_BW, Culprit, JudgeSettings, Verdict
from hpcval.vet.ranks import median
from hpcval.vet.schedule import Pair, pair


def _key(p: Pair) -> str:
    return f"{p[0]}|{p[1]}"


def doubtful(verdict: Verdict, settings: JudgeSettings) -> list[Pair]:
    """Pairs between unnamed nodes judged worse than twice ``min_effect`` but not
    off: measured again in the follow-up rounds, worst first."""
    named = set(verdict.named_nodes)
    linked = {c.name for c in verdict.culprits if c.kind == "link"}
    out = []
    for key, d in verdict.pairs.items():
        a, b = key.split("|")
        if (not d.low and d.worse_by > 2 * settings.effect(PAIR_BW)
                and a not in named and b not in named and f"{a}<->{b}" not in linked):
            out.append((d.worse_by, pair(a, b)))
    return [p for _, p in sorted(out, reverse=True)]


def confirmed_nodes(first: Verdict, follow_up_rounds: Sequence[Sequence[Pair]],
                    again: Collection[Pair], samples: Mapping[Pair, Sequence[float]],
                    settings: JudgeSettings) -> set[str]:
    """Nodes the judging after the follow-up may name: named by the first judging,
    and low with their fresh peers of the follow-up rounds (a node with none
    measured stays as the first judging found it). The others get a note."""
    named = {c.name for c in first.culprits if c.kind == "node"}
    in_switch = {n for c in first.culprits if c.kind == "switch" for n in c.nodes}
    centers = [d.center for d in first.pairs.values()]
    if not centers:
        return named | in_switch
    center = centers[0]
    fresh: dict[str, list[float]] = {}
    for rnd in follow_up_rounds:
        for p in rnd:
            if p in again or not samples.get(p):
                continue  # a pair measured again is a link suspect, not a fresh peer
            for me, peer in (p, p[::-1]):
                if me in named and peer not in named:
                    fresh.setdefault(me, []).append(median(samples[p]))
    keep = set(in_switch)
    for n in sorted(named):
        vals = fresh.get(n)
        if not vals:
            keep.add(n)
            continue
        value = median(vals)
        worse = PAIR_BW.worse(value, center)
        if worse > settings.effect(PAIR_BW) / 2:
            keep.add(n)
        else:
            first.notes.append(
                f"{n}: {PAIR_BW.label} low with its planned peers, not with {len(vals)} fresh "
                f"peer(s) in the follow-up rounds (median {value:.3g} against the healthy "
                f"pairs' {center:.3g} {PAIR_BW.unit}): not named")
    return keep


def _second_best(samples: Sequence[float]) -> float:
    """The second-highest sample: a pair's bandwidth with its one best sample set
    aside; a few dipped samples, which pull a median of 5 down, leave it."""
    return sorted(samples)[-2] if len(samples) >= 2 else 0.0


def judge_links_again(first: Verdict, final: Verdict, again: Mapping[Pair, Sequence[float]],
                      settings: JudgeSettings,
                      samples: Mapping[Pair, Sequence[float]] | None = None,
                      cleared: Collection[str] = ()) -> None:
    """Links of the judging after the follow-up: a link not measured again is not
    named (a note says so); a pair measured again (``again``: its first samples;
    ``samples``: the new ones) whose median is worse than ``min_effect`` in both
    measurements, and whose second-best samples of the two are worse than twice
    ``min_effect`` (their geometric mean), is named, off or not. A link with an
    end in ``cleared`` (named by the first judging, fine with fresh peers) is
    not measured again but kept: the follow-up measured its end instead."""
    final.notes += [n for n in first.notes if n not in final.notes]
    effect = settings.effect(PAIR_BW)
    big = 2 * effect
    kept: list[Culprit] = []
    for c in final.culprits:
        if c.kind != "link":
            kept.append(c)
            continue
        p = pair(*c.name.split("<->"))
        if p in again or set(p) & set(cleared):
            d1 = first.pairs.get(_key(p))
            if p not in again:
                c.evidence += "; its end named first was not low with fresh peers"
            elif d1 is not None:
                c.evidence += (f"; first measurement {d1.value:.3g} {PAIR_BW.unit}, "
                               f"{d1.worse_by * 100:.0f} % below")
            kept.append(c)
        else:
            final.notes.append(f"{c.name}: {PAIR_BW.label} low in one measurement only (not "
                               "measured again): not named")
    named = set(final.named_nodes)
    in_kept = {c.name for c in kept if c.kind == "link"}
    for p in again:
        name = f"{p[0]}<->{p[1]}"
        d1, d2 = first.pairs.get(_key(p)), final.pairs.get(_key(p))
        if (name in in_kept or d1 is None or d2 is None or set(p) & named
                or d1.worse_by <= effect or d2.worse_by <= effect):
            continue
        now = (samples or {}).get(p, ())
        if len(again[p]) < 3 or len(now) < 3 or (
                _second_best(again[p]) / d1.center * _second_best(now) / d2.center
                >= (1 - big) ** 2):
            continue
        kept.append(Culprit(
            "link", name, PAIR_BW.name,
            f"{name}: {PAIR_BW.label} {d2.value:.3g} {PAIR_BW.unit} measured again, "
            f"{d2.worse_by * 100:.0f} % below the pairs of healthy nodes (median "
            f"{d2.center:.3g} {PAIR_BW.unit}); first measurement {d1.value:.3g} "
            f"{PAIR_BW.unit}, {d1.worse_by * 100:.0f} % below: twice more than "
            f"{big * 100:.0f} % low", []))
    final.culprits = kept
