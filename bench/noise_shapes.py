"""False alarms and detection of hpcval's verdicts on simulated noise shapes.

Each trial draws a history of ``--history`` clean runs (``--samples`` samples
each) of one figure, then judges one more run with
:func:`hpcval.history.judging.judge_figure` (the site defaults: K = 5, 5 %
threshold, alpha 0.05, statistic ``auto``):

* **clean**: drawn like the history; an alarm (``regressed`` or ``unstable``) is
  a false alarm; a run held out of baselines (``held``: moved 2x, or
  inconclusive where one run cannot resolve 50 %) is counted too;
* **drop 20 %**: every sample 20 % worse (a bandwidth x0.8, a latency x1.25);
* **fast mode gone** (two-moded shapes): every sample from the slow mode.

Beside each detection rate: an **oracle** that knows the noise model, at the same
level: the current run's median and its fast-mode quantile are each compared
with their 95th percentile under no change (5,000 clean draws; the better of
the two tests counts, a bound no statistic from one run can beat by much).

Shapes (log scale; ``b`` between runs, ``w`` within a run):

* ``gaussian``: b ~ N(0, 5 %), w ~ N(0, 3 %);
* ``heavy``: b ~ 4 % t(3), w ~ 3 % t(3) (heavy tails both ways);
* ``drift``: a random walk of 1 % per run under the gaussian shape;
* ``modes-within``: a latency whose samples are fast (N(0, 5 %)) or slow
  (x15, sd 50 %); each run's slow share ~ Beta(2, 8) (20 % on average): the
  loaded machine's small-message latency (tests/data/judging/local-modes.json);
* ``modes-between``: a bandwidth whose whole runs fall into a slow mode (30 % of
  runs, x0.75) besides the gaussian noise.

    python bench/noise_shapes.py --trials 400
    python bench/noise_shapes.py --trials 300 --ashman 19 30   # the between-runs test
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

import numpy as np

from hpcval.history.judging import JudgingSettings, judge_figure, modes
from hpcval.history.judging.modes import FAST_QUANTILE, hold_reason

ALARMS = ("regressed", "unstable")


def _gauss(rng: np.random.Generator, n: int, state: dict) -> np.ndarray:
    return np.exp(rng.normal(0, 0.05) + rng.normal(0, 0.03, n))


def _heavy(rng: np.random.Generator, n: int, state: dict) -> np.ndarray:
    return np.exp(0.04 * rng.standard_t(3) + 0.03 * rng.standard_t(3, n))


def _drift(rng: np.random.Generator, n: int, state: dict) -> np.ndarray:
    state["walk"] = state.get("walk", 0.0) + rng.normal(0, 0.01)
    return np.exp(state["walk"] + rng.normal(0, 0.05) + rng.normal(0, 0.03, n))


def _modes_within(rng: np.random.Generator, n: int, state: dict,
                  share: float | None = None) -> np.ndarray:
    p = rng.beta(2, 8) if share is None else share
    slow = rng.random(n) < p
    fast = np.exp(rng.normal(0, 0.05, n))
    return np.where(slow, 15 * np.exp(rng.normal(0, 0.5, n)), fast) * 5.0


def _modes_between(rng: np.random.Generator, n: int, state: dict) -> np.ndarray:
    level = 0.75 if rng.random() < 0.3 else 1.0
    return 100 * level * np.exp(rng.normal(0, 0.03) + rng.normal(0, 0.03, n))


#: name -> (draw, better, two-moded within runs)
SHAPES: dict[str, tuple[Callable[..., np.ndarray], str, bool]] = {
    "gaussian": (_gauss, "higher", False),
    "heavy": (_heavy, "higher", False),
    "drift": (_drift, "higher", False),
    "modes-within": (_modes_within, "lower", True),
    "modes-between": (_modes_between, "higher", False),
}


def _worse(x: np.ndarray, better: str, factor: float = 0.8) -> np.ndarray:
    return x * factor if better == "higher" else x / factor


def _stats(x: np.ndarray, better: str) -> tuple[float, float]:
    """(median, fast-mode quantile) as 'worse is larger' scores on the log scale."""
    q = FAST_QUANTILE if better == "lower" else 1 - FAST_QUANTILE
    sign = 1.0 if better == "lower" else -1.0
    lx = np.log(x)
    return sign * float(np.median(lx)), sign * float(np.quantile(lx, q))


def oracle(shape: str, faulty: list[np.ndarray], n: int, rng: np.random.Generator,
           draws: int = 5000, alpha: float = 0.05) -> float:
    """Share of ``faulty`` runs the better of the two known-null tests calls."""
    draw, better, _ = SHAPES[shape]
    # each null draw from a fresh state: a drifting level is known up to its
    # last step (the oracle knows where the walk stood)
    null = np.array([_stats(draw(rng, n, {}), better) for _ in range(draws)])
    limits = np.quantile(null, 1 - alpha / 2, axis=0)  # two tests: Bonferroni
    got = np.array([_stats(x, better) for x in faulty])
    return float(np.mean(np.any(got > limits, axis=1)))


def evaluate(shape: str, trials: int, history: int, n: int, seed: int) -> dict:
    draw, better, moded = SHAPES[shape]
    rng = np.random.default_rng(seed)
    settings = JudgingSettings()
    out: dict[str, dict] = {}
    kinds = ["clean", "drop 20 %"] + (["fast mode gone"] if moded else [])
    for kind in kinds:
        counts: dict[str, int] = {}
        faulty = []
        for _ in range(trials):
            state: dict = {}
            runs = [draw(rng, n, state) for _ in range(history)]
            cur = draw(rng, n, state)
            if kind == "drop 20 %":
                cur = _worse(cur, better)
            elif kind == "fast mode gone":
                cur = _modes_within(rng, n, state, share=1.0)
            faulty.append(cur)
            v = judge_figure([list(r) for r in runs], list(cur), better, settings,
                             name=f"sim/{shape}")
            counts[v.outcome] = counts.get(v.outcome, 0) + 1
            if hold_reason(v.outcome, v.change, v.needed.threshold if v.needed else None,
                           settings.hold_factor) is not None:
                counts["held"] = counts.get("held", 0) + 1
        alarms = sum(counts.get(o, 0) for o in ALARMS)
        row = {"alarm": alarms / trials, "held": counts.get("held", 0) / trials,
               "outcomes": counts}
        if kind != "clean":
            row["oracle"] = oracle(shape, faulty, n, rng)
        out[kind] = row
    return out


def ashman(shape: str, trials: int, runs: int, n: int, seed: int) -> np.ndarray:
    """Ashman's D of the best split of ``runs`` clean run values (log medians) of
    ``shape``, ``trials`` times: what :data:`modes.RUNS_ASHMAN_D` is set from."""
    draw, better, _ = SHAPES[shape]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(trials):
        state: dict = {}
        logs = [np.log(draw(rng, n, state)) for _ in range(runs)]
        # the judged statistic, as judge_figure reads it: the fast mode of the
        # runs that have one where the samples are two-moded, else the median
        cut = modes.split(logs)
        if cut is None:
            values = [float(np.median(x)) for x in logs]
        else:
            values = [modes.run_level(x, better, "fast", cut) for x in logs
                      if modes.fast_side(x, cut, better).size >= modes.MIN_FAST]
        out.append(modes.runs_ashman_d(values))
    return np.array(out, dtype=float)


def recorded(path: str) -> dict:
    """Replay a recording of bench/modes_record.py: each clean run from the 6th on
    judged against the clean runs before it, each fault run against every clean
    run, once with the median and once with the statistic chosen from the
    data's shape (``auto``). Returns {statistic: {figure: {kind: outcomes}}}."""
    data = json.loads(open(path).read())
    runs = sorted(data["runs"], key=lambda r: r["started"])
    clean = [r for r in runs if r["condition"] == "clean"]
    faulty = [r for r in runs if r["condition"] != "clean"]
    out: dict = {}
    for statistic in ("median", "auto"):
        settings = JudgingSettings(statistic=statistic)
        per: dict = {}
        for name, meta in data["figures"].items():
            got: dict[str, list[str]] = {"clean": [], "fault": []}
            for i in range(6, len(clean) + 1):
                base = [r["figures"][name] for r in clean[:i - 1]]
                cur = clean[i - 1]["figures"][name]
                got["clean"].append(judge_figure(base, cur, meta["better"], settings,
                                                 name=f"rec/{name}").outcome)
            base = [r["figures"][name] for r in clean]
            for r in faulty:
                v = judge_figure(base, r["figures"][name], meta["better"], settings,
                                 name=f"rec/{name}")
                got["fault"].append(f"{v.outcome} {v.change:+.0%}" if v.change is not None
                                    else v.outcome)
            per[name] = got
        out[statistic] = per
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--history", type=int, default=30)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=32)
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES))
    ap.add_argument("--json", help="also write the numbers here")
    ap.add_argument("--recorded", help="also replay a recording of bench/modes_record.py")
    ap.add_argument("--ashman", type=int, nargs="*", metavar="RUNS",
                    help="instead: Ashman's D of clean run values per shape, for these "
                         "numbers of runs (the between-runs test's calibration)")
    args = ap.parse_args()
    if args.ashman:
        print(f"{'shape':14} {'runs':>4}  D: median   99 %    max  share >= "
              f"{modes.RUNS_ASHMAN_D:g}")
        for i, shape in enumerate(args.shapes):
            for runs in args.ashman:
                d = ashman(shape, args.trials, runs, args.samples, args.seed + i)
                print(f"{shape:14} {runs:>4}  {np.median(d):>9.2f} {np.quantile(d, 0.99):>6.2f} "
                      f"{d.max():>6.2f}  {np.mean(d >= modes.RUNS_ASHMAN_D):>8.1%}", flush=True)
        return 0
    if args.recorded:
        for statistic, per in recorded(args.recorded).items():
            for name, got in per.items():
                c = got["clean"]
                alarms = sum(o in ALARMS for o in c)
                print(f"recorded {statistic:6} {name}: clean {alarms} alarms of {len(c)} "
                      f"({', '.join(sorted(set(c)))}); fault runs: {'; '.join(got['fault'])}")
        if not args.shapes:
            return 0
    results = {}
    print(f"{'shape':14} {'clean: alarms':>14} {'held':>6} {'drop 20 %':>10} {'oracle':>7}"
          f" {'fast gone':>10} {'oracle':>7}")
    for i, shape in enumerate(args.shapes):
        r = evaluate(shape, args.trials, args.history, args.samples, args.seed + i)
        results[shape] = r
        gone = r.get("fast mode gone")
        print(f"{shape:14} {r['clean']['alarm']:>13.1%} {r['clean']['held']:>6.1%} "
              f"{r['drop 20 %']['alarm']:>10.1%} {r['drop 20 %']['oracle']:>7.1%} "
              + (f"{gone['alarm']:>10.1%} {gone['oracle']:>7.1%}" if gone else
                 f"{'-':>10} {'-':>7}") + f"  {r['clean']['outcomes']}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"trials": args.trials, "history": args.history,
                       "samples": args.samples, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
