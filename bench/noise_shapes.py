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


# ------------------------------------------------------------ validate's whole path
#: the one test case of a simulated run, named as the store names cases
CASE = "sim_check@sim:default+env"


class Pipeline:
    """``hpcval validate``'s path for one figure, without the store: each run is
    judged by :func:`hpcval.run.decide.decide` (the window, ``judge_run``, the
    sustained rule, what the sustained rule makes of a verdict, holds) against
    the points before it, then kept as ``store_and_judge`` keeps it (accepted
    or not, its result, its hold; held runs a later run decides become
    outliers). ``tests/unit/test_noise_pipeline.py`` checks it run for run
    against ``store_and_judge`` on a real store."""

    def __init__(self, better: str, unit: str = "MB/s", settings: JudgingSettings | None = None,
                 variable: str = "fig") -> None:
        self.better, self.unit, self.variable = better, unit, variable
        self.settings = settings or JudgingSettings()
        self.points: list = []
        self.holds: dict[str, dict] = {}

    def _point(self, run_id: str, samples: np.ndarray, accepted: bool, result: str):
        from hpcval.history.records import HistoryPoint

        return HistoryPoint(run_id, None, accepted, CASE, self.variable, self.unit, self.better,
                            float(np.median(samples)), [float(x) for x in samples], None,
                            run_result=result)

    def prefill(self, runs: list[np.ndarray]) -> None:
        """Accepted runs of history (judged clean before; not judged here)."""
        for x in runs:
            self.points.append(self._point(f"r{len(self.points):05d}", x, True, "pass"))

    def judge(self, samples: np.ndarray, run_id: str | None = None) -> tuple[str, dict, bool]:
        """One run through validate's decision: (outcome, detail, accepted)."""
        from hpcval.history.records import CaseRecord, FigureRecord
        from hpcval.run.decide import decide
        from hpcval.run.holds import released_by

        run_id = run_id or f"r{len(self.points):05d}"
        fig = FigureRecord(self.variable, self.unit, self.better, float(np.median(samples)),
                           [float(x) for x in samples])
        case = CaseRecord(CASE, "sim_check", {}, "sim", "default", "env", "", "", "", "pass",
                          None, None, [fig])
        d = decide(self.settings, run_id, [case], {(CASE, self.variable): list(self.points)},
                   self.holds)
        self.points.append(self._point(run_id, samples, d.accepted, d.result))
        if d.hold is not None:
            self.holds[run_id] = d.hold
        else:
            for held in released_by(self.holds, run_id, d.verdicts):
                self.holds[held] = {**self.holds[held], "state": "outlier",
                                    "confirmed_by": run_id}
        _, _, outcome, detail = d.verdicts[0]
        return outcome, detail, d.accepted


def _ar(phi: float) -> Callable[..., np.ndarray]:
    """Between-run level an AR(1) of lag-1 correlation ``phi`` (stationary sd 5 %),
    within-run 3 %: a level that wanders and comes back."""
    def draw(rng: np.random.Generator, n: int, state: dict) -> np.ndarray:
        if "b" not in state:
            state["b"] = rng.normal(0, 0.05)
        else:
            state["b"] = phi * state["b"] + rng.normal(0, 0.05 * np.sqrt(1 - phi * phi))
        return 100 * np.exp(state["b"] * state.get("scale", 1.0) + rng.normal(0, 0.03, n))
    return draw


def _gauss_scaled(rng: np.random.Generator, n: int, state: dict) -> np.ndarray:
    """The gaussian shape whose between-run sd is ``state["scale"]`` times 5 %."""
    return 100 * np.exp(rng.normal(0, 0.05 * state.get("scale", 1.0)) + rng.normal(0, 0.03, n))


NOISE: dict[str, tuple[Callable[..., np.ndarray], str]] = {
    **{k: (v[0], v[1]) for k, v in SHAPES.items()},
    "gaussian": (_gauss_scaled, "higher"),
    "ar0.5": (_ar(0.5), "higher"),
    "ar0.8": (_ar(0.8), "higher"),
}

#: name -> (noise, runs of history, [(runs, kind, factor)]): kinds ``clean``,
#: ``fault`` (worse by ``factor``: a bandwidth x factor), ``good`` (better by
#: it), ``spread`` (the between-run sd times ``factor``, the level unchanged),
#: ``fault-spread`` (worse by ``factor`` while the between-run sd doubles: two
#: faults at once)
SEQUENCES: dict[str, tuple[str, int, list[tuple[int, str, float]]]] = {
    "gaussian": ("gaussian", 30, [(10, "clean", 1.0)]),
    "heavy": ("heavy", 30, [(10, "clean", 1.0)]),
    "drift": ("drift", 30, [(10, "clean", 1.0)]),
    "modes-within": ("modes-within", 30, [(10, "clean", 1.0)]),
    "modes-between": ("modes-between", 30, [(10, "clean", 1.0)]),
    "ar0.5": ("ar0.5", 30, [(20, "clean", 1.0)]),
    "ar0.8": ("ar0.8", 30, [(20, "clean", 1.0)]),
    "after-x0.5": ("gaussian", 30, [(1, "fault", 0.5), (10, "clean", 1.0)]),
    "spread-x2": ("gaussian", 30, [(15, "spread", 2.0)]),
    "t3-10": ("heavy", 10, [(5, "clean", 1.0)]),
    "good-x1.5": ("gaussian", 30, [(1, "good", 1.5), (5, "clean", 1.0)]),
    "step-return": ("gaussian", 30, [(3, "fault", 0.92), (8, "clean", 1.0)]),
    "step-10": ("gaussian", 30, [(8, "fault", 0.9)]),
    "step-10-ar0.5": ("ar0.5", 30, [(8, "fault", 0.9)]),
    "drop-20": ("gaussian", 30, [(1, "fault", 0.8)]),
    # several at once: a step while the spread doubles; a drop under a wandering level
    "step-10-spread-x2": ("gaussian", 30, [(8, "fault-spread", 0.9)]),
    "drop-20-ar0.8": ("ar0.8", 30, [(1, "fault", 0.8)]),
}


def sequence(name: str, trials: int, n: int, seed: int) -> list[list[tuple[str, str, bool]]]:
    """``trials`` simulated histories of ``name`` judged through validate's
    path: per trial, each judged run's (kind, outcome, accepted)."""
    noise, history, plan = SEQUENCES[name]
    draw, better = NOISE[noise]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(trials):
        state: dict = {}
        pipe = Pipeline(better, "us" if better == "lower" else "MB/s")
        pipe.prefill([draw(rng, n, state) for _ in range(history)])
        got = []
        for count, kind, factor in plan:
            for _ in range(count):
                state["scale"] = {"spread": factor, "fault-spread": 2.0}.get(kind, 1.0)
                x = draw(rng, n, state)
                if kind in ("fault", "good", "fault-spread"):
                    x = _worse(x, better, factor)  # x factor in the better direction's unit
                outcome, _, accepted = pipe.judge(x)
                got.append((kind, outcome, accepted))
        out.append(got)
    return out


def _rate(hits: int, total: int) -> str:
    return f"{hits / total:.1%} ({hits}/{total})" if total else "-"


def summarize_sequence(name: str, got: list[list[tuple[str, str, bool]]]) -> dict[str, str]:
    """The figures the issue's goals read, per sequence."""
    plan = SEQUENCES[name][2]
    out: dict[str, str] = {}
    clean = [(i, o, a) for seq in got for i, (k, o, a) in enumerate(seq) if k == "clean"]
    if clean:
        out["false alarms per clean run"] = _rate(sum(o in ALARMS for _, o, _ in clean),
                                                  len(clean))
        out["held per clean run"] = _rate(sum(not a and o not in ALARMS for _, o, a in clean),
                                          len(clean))
    first_clean = next((i for i, (_, k, _) in enumerate(_flat(plan)) if k == "clean"), None)
    if first_clean is not None and first_clean > 0:
        first3 = [seq[j][1] for seq in got for j in range(first_clean, first_clean + 3)]
        out["alarms in the first 3 clean runs"] = _rate(sum(o in ALARMS for o in first3),
                                                        len(first3))
        out["sequences with an alarm on a clean run"] = _rate(
            sum(any(k == "clean" and o in ALARMS for k, o, _ in seq) for seq in got), len(got))
    if name == "spread-x2":
        flat = [o for seq in got for _, o, _ in seq]
        out["regressed or improved"] = _rate(sum(o in ("regressed", "improved") for o in flat),
                                             len(flat))
        late = [seq[j][1] for seq in got for j in range(5, len(seq))]
        out["unstable after 5 such runs"] = _rate(sum(o == "unstable" for o in late), len(late))
    if name == "good-x1.5":
        out["x1.5 run accepted"] = _rate(sum(seq[0][2] for seq in got), len(got))
        out["x1.5 run held or called"] = _rate(sum(not seq[0][2] for seq in got), len(got))
    faults = [o for seq in got for k, o, _ in seq if k.startswith("fault")]
    if name.startswith(("step-10", "drop-20")):
        by = 1 if name.startswith("drop-20") else 5
        out[f"called by run {by}"] = _rate(
            sum(any(o == "regressed" for _, o, _ in seq[:by]) for seq in got), len(got))
        if not name.startswith("drop-20"):  # a level that moved, named as a grown spread
            out["step runs named unstable"] = _rate(sum(o == "unstable" for o in faults),
                                                    len(faults))
    if name == "step-return":
        out["step runs called"] = _rate(sum(o == "regressed" for o in faults), len(faults))
    if name == "after-x0.5":
        out["x0.5 run called"] = _rate(sum(seq[0][1] == "regressed" for seq in got), len(got))
    return out


def _flat(plan: list[tuple[int, str, float]]) -> list[tuple[int, str, float]]:
    return [(c, k, f) for c, k, f in plan for _ in range(c)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--history", type=int, default=30)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=32)
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES))
    ap.add_argument("--json", help="also write the numbers here")
    ap.add_argument("--recorded", help="also replay a recording of bench/modes_record.py")
    ap.add_argument("--sequences", nargs="*", metavar="NAME",
                    help="instead: judge simulated histories through validate's whole path "
                         f"(hpcval.run.decide), 5 samples per run; names: {', '.join(SEQUENCES)}"
                         " (none: all)")
    ap.add_argument("--ashman", type=int, nargs="*", metavar="RUNS",
                    help="instead: Ashman's D of clean run values per shape, for these "
                         "numbers of runs (the between-runs test's calibration)")
    args = ap.parse_args()
    if args.sequences is not None:
        seq_out = {}
        for name in args.sequences or list(SEQUENCES):
            if name not in SEQUENCES:
                print(f"noise_shapes.py: --sequences: unknown '{name}'; one of "
                      f"{', '.join(SEQUENCES)}", file=sys.stderr)
                return 2
            # the seed follows the name, not its place on the command line
            got = sequence(name, args.trials, 5, args.seed + 100 + list(SEQUENCES).index(name))
            seq_out[name] = summarize_sequence(name, got)
            print(f"{name:14} " + "; ".join(f"{k}: {v}" for k, v in seq_out[name].items()),
                  flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"trials": args.trials, "samples": 5, "sequences": seq_out}, f,
                          indent=1)
        return 0
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
