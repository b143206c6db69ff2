"""Coverage and error rates of ``hpcval compare`` on recorded lab runs.

Replays (docs/compare.md): side A is ``n`` runs drawn at random, with
replacement, from a recording's clean runs; side B ``n`` runs from the runs
at one slowed level (or, for "clean vs clean", again from the clean runs, drawn
independently). Each replay is compared by
:func:`hpcval.history.judging.compare.compare_sets` exactly as ``hpcval compare``
does (families, Holm, equivalence margin 5 %), given the site's run-to-run
spread as the store gives it: per figure the verdicts' pooled spread of the
clean runs on neither side of the replay, with its degrees of freedom
(``--sides-only``: none, each side's own runs only). Drawing with replacement makes
the recorded runs of a level the population the sides are drawn from, so the
**true ratio** of a figure is known: the ratio of the geometric means of the
run medians of all recorded runs at the two levels (1 for clean vs clean).

Reported per recording, runs per side and level:

* how often bw_1MiB's nominal 95 % interval covers its true ratio, and its
  median half-width;
* how often the bandwidth family is ``worse``, ``better``, ``same``,
  ``inconclusive``; and how often any family is ``worse`` or ``better``.

    python bench/compare_coverage.py [--replays 400] [--seed 1] [--without-replacement]
                                     [--sides-only]

The recordings are those of tests/data/judging (README there): recording 1
and its completion (same machine, same settings) are pooled, which gives 20
clean runs and 10 at each of 3, 5, 10 and 20 % slower links; lab-pool.json
has 16 clean runs and 8 at 10 and 20 %.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from hpcval.history.judging.compare import FigurePair, compare_sets
from hpcval.history.judging.model import pooled_spread

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "judging"
FIGURE = "bw_1MiB"
CASE = "imb_pingpong_internode_check@lab:lab+impi"


def load(names: list[str]) -> tuple[dict, dict[int, list[dict]]]:
    """The figures' metadata and the runs of the files ``names`` by drop (%)."""
    meta: dict = {}
    by: dict[int, list[dict]] = {}
    for name in names:
        data = json.loads((DATA / name).read_text())
        meta = data["figures"]
        for r in data["runs"]:
            by.setdefault(int(r["drop_pct"]), []).append(r)
    return meta, by


def _log_median(run: dict, fig: str) -> float:
    return math.log(float(np.median(run["figures"][fig])))


def true_ratio(clean: list[dict], slowed: list[dict], fig: str) -> float:
    a = np.mean([_log_median(r, fig) for r in clean])
    b = np.mean([_log_median(r, fig) for r in slowed])
    return float(math.exp(b - a))


def history(meta: dict, runs: list[dict], min_spread: float = 0.005
            ) -> dict[str, tuple[float | None, int]]:
    """Per figure the site's run-to-run spread from ``runs`` (the clean runs on
    neither side) and its degrees of freedom, as ``hpcval compare`` reads it
    from the store (``hpcval.history.runsets``): the verdicts' pooled spread of
    the log run medians, floored at ``min_spread``; ``(None, 0)`` below 3 runs."""
    out: dict[str, tuple[float | None, int]] = {}
    for f in meta:
        if len(runs) < 3:
            out[f] = (None, 0)
            continue
        sd, df, _ = pooled_spread([_log_median(r, f) for r in runs])
        out[f] = (None, 0) if math.isnan(sd) else (max(sd, min_spread), df)
    return out


def pairs(meta: dict, a: list[dict], b: list[dict],
          hist: dict[str, tuple[float | None, int]] | None = None) -> dict[str, FigurePair]:
    ids_a = [f"a{i}" for i in range(len(a))]
    ids_b = [f"b{i}" for i in range(len(b))]
    return {f"{CASE}/{f}": FigurePair([r["figures"][f] for r in a],
                                      [r["figures"][f] for r in b], m["better"], m["unit"],
                                      m["size"], ids_a, ids_b,
                                      *(hist[f] if hist else (None, 0)))
            for f, m in meta.items()}


def replay(meta: dict, clean: list[dict], slowed: list[dict], n: int, replays: int,
           rng: np.random.Generator, replace: bool = True, site: bool = True,
           ) -> dict[str, float] | None:
    """``site``: the site's spread from the clean runs on neither side is given
    to the comparison (as the store gives it); False: each side's own runs only."""
    truth = true_ratio(clean, slowed, FIGURE)
    covered = 0
    widths = []
    counts = dict.fromkeys(("worse", "better", "same", "inconclusive"), 0)
    any_moved = 0
    same_pool = clean is slowed
    if not replace and n * (2 if same_pool else 1) > min(len(clean), len(slowed)):
        return None
    for _ in range(replays):
        if replace:
            ia, ib = rng.integers(0, len(clean), n), rng.integers(0, len(slowed), n)
        elif same_pool:  # clean vs clean: two disjoint sets of runs
            pick = rng.permutation(len(clean))[:2 * n]
            ia, ib = pick[:n], pick[n:]
        else:
            ia, ib = rng.permutation(len(clean))[:n], rng.permutation(len(slowed))[:n]
        a, b = [clean[i] for i in ia], [slowed[i] for i in ib]
        hist = None
        if site:
            drawn = set(int(i) for i in ia) | (set(int(i) for i in ib) if same_pool else set())
            hist = history(meta, [r for i, r in enumerate(clean) if i not in drawn])
        comp = compare_sets(pairs(meta, a, b, hist))
        fig = comp.figures[f"{CASE}/{FIGURE}"]
        lo, hi = fig.change.low, fig.change.high
        if lo is not None and hi is not None:
            widths.append(math.log1p(hi) - math.log1p(lo))
            covered += 1 + lo <= truth <= 1 + hi
        bw = next(f for f in comp.families if f.name == "bandwidth")
        counts[bw.outcome] += 1
        any_moved += any(f.outcome in ("worse", "better") for f in comp.families)
    out = {"truth": truth, "coverage": covered / replays, "any_moved": any_moved / replays,
           "width": math.expm1(float(np.median(widths)) / 2) if widths else math.nan}
    out.update({k: v / replays for k, v in counts.items()})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replays", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", default="3,5,10", help="runs per side, comma-separated")
    ap.add_argument("--without-replacement", action="store_true",
                    help="draw each side's runs without replacement (distinct runs, as a "
                    "site has; a cell needs that many recorded runs); the truth is still the "
                    "ratio over all recorded runs, so small populations over-cover")
    ap.add_argument("--sides-only", action="store_true",
                    help="give the comparison no site spread: each side's interval from its "
                    "own runs only (the interval before the site's spread was pooled in)")
    args = ap.parse_args(argv)
    recordings = {"recording 1 (competing traffic; lab-pingpong.json + lab-pingpong-2.json)":
                  ["lab-pingpong.json", "lab-pingpong-2.json"],
                  "lab-pool.json (one slow node of 4)": ["lab-pool.json"]}
    ns = [int(x) for x in args.runs.split(",")]
    began = time.time()
    for title, files in recordings.items():
        meta, by = load(files)
        clean = by[0]
        how = "without" if args.without_replacement else "with"
        print(f"\n### {title}, runs drawn {how} replacement\n")
        print(f"{len(clean)} clean runs; " + ", ".join(
            f"{len(v)} at {k} %" for k, v in sorted(by.items()) if k) + f"; {args.replays} "
            "replays per cell; bandwidth family outcome worse / better / same / inconclusive\n")
        print(f"| B | true {FIGURE} ratio | runs per side | {FIGURE} 95 % interval covers "
              "| its median half-width | bandwidth: worse / better / same / inconclusive "
              "| any family worse or better |")
        print("|---|---|---|---|---|---|---|")
        for drop in sorted(by):
            rng = np.random.default_rng(args.seed + drop)
            for n in ns:
                r = replay(meta, clean, by[drop], n, args.replays, rng,
                           replace=not args.without_replacement, site=not args.sides_only)
                if r is None:
                    continue
                label = "clean" if drop == 0 else f"{drop} % slower"
                print(f"| {label} | {r['truth']:.3f} | {n} | {r['coverage']:.1%} | "
                      f"{r['width']:.1%} | "
                      f"{r['worse']:.1%} / {r['better']:.1%} / {r['same']:.1%} / "
                      f"{r['inconclusive']:.1%} | {r['any_moved']:.1%} |", flush=True)
    print(f"\n({time.time() - began:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
