"""Detection tables from recorded lab runs (``bench/detection.py evaluate``).

Replays the recorded runs through ``hpcval.history.judging`` the way a site's nightly
validation would meet them:

* **false alarms**: every clean run judged against the K clean runs recorded
  before it (cyclically for the first ones), all figures together (Holm);
* **single-run detection**: every degraded run judged against the K clean runs
  recorded last before it;
* **sustained drop**: trials of ``history`` clean runs followed by degraded runs
  of one level in random order; at each new run the single-run verdict (against
  the last K *accepted* runs: a degraded run that was not flagged is accepted,
  as it would be) and the change points of the run medians are checked; the
  trial counts the runs until either flags. The same procedure on clean runs
  gives the rule's false alarms.
* **fixed bands** (the old way): the reference is one clean run's median, the band
  +-5 % or +-10 %; a value beyond the band on the worse side is `regressed`.

Besides the 10 (or 20) trials that map one-to-one to recorded runs, each rate
is also estimated by ``--trials`` random replays (runs drawn from the pools).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcval.history.judging import FigureData, JudgingSettings, judge_run, sustained_run

Run = dict  # one recorded run: {"drop_pct", "figures": {name: samples}, ...}


@dataclass
class Pools:
    figures: dict[str, dict]
    clean: list[Run]
    degraded: dict[int, list[Run]]


def load(paths: Sequence[str | Path]) -> Pools:
    figures: dict[str, dict] = {}
    runs: list[Run] = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        figures.update(data["figures"])
        runs += sorted(data["runs"], key=lambda r: r["started"])
    runs.sort(key=lambda r: r["started"])
    clean = [r for r in runs if r["drop_pct"] == 0]
    degraded: dict[int, list[Run]] = {}
    for r in runs:
        if r["drop_pct"]:
            degraded.setdefault(r["drop_pct"], []).append(r)
    return Pools(figures, clean, dict(sorted(degraded.items())))


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def judge(pools: Pools, baseline: Sequence[Run], current: Run,
          settings: JudgingSettings) -> dict[str, str]:
    data = {name: FigureData([b["figures"][name] for b in baseline], current["figures"][name],
                             meta["better"], meta["unit"])
            for name, meta in pools.figures.items()}
    return {k: v.outcome for k, v in judge_run(data, settings).items()}


def band_regressed(pools: Pools, reference: Run, current: Run, tol: float) -> dict[str, bool]:
    out = {}
    for name, meta in pools.figures.items():
        ref = median(reference["figures"][name])
        val = median(current["figures"][name])
        out[name] = val < ref * (1 - tol) if meta["better"] == "higher" else val > ref * (1 + tol)
    return out


def before(runs: Sequence[Run], run: Run, k: int) -> list[Run]:
    """The last k runs of ``runs`` recorded before ``run`` (cyclic for early ones)."""
    earlier = [r for r in runs if r["started"] < run["started"] and r is not run]
    if len(earlier) >= k:
        return earlier[-k:]
    later = [r for r in runs if r["started"] > run["started"]]
    return (later + earlier)[-k:] if len(later) + len(earlier) >= k else []


# --------------------------------------------------------------------------- the tables
def false_alarms(pools: Pools, settings: JudgingSettings) -> dict:
    names = list(pools.figures)
    per_fig = dict.fromkeys(names, 0)
    runs_hit = 0
    outcomes: dict[str, int] = {}
    for run in pools.clean:
        base = before(pools.clean, run, settings.k)
        verdict = judge(pools, base, run, settings)
        for name, outcome in verdict.items():
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            per_fig[name] += outcome == "regressed"
        runs_hit += any(o == "regressed" for o in verdict.values())
    return {"runs": len(pools.clean), "runs_with_false": runs_hit, "per_figure": per_fig,
            "outcomes": outcomes}


def band_false(pools: Pools, tol: float) -> dict:
    names = list(pools.figures)
    per_fig = dict.fromkeys(names, 0)
    runs_hit = 0
    for i, run in enumerate(pools.clean):
        ref = pools.clean[i - 1]  # the previous clean run captured the references
        hit = band_regressed(pools, ref, run, tol)
        for name in names:
            per_fig[name] += hit[name]
        runs_hit += any(hit.values())
    return {"runs": len(pools.clean), "runs_with_false": runs_hit, "per_figure": per_fig}


def single_detection(pools: Pools, settings: JudgingSettings) -> dict[int, dict]:
    out = {}
    for drop, runs in pools.degraded.items():
        per_fig = dict.fromkeys(pools.figures, 0)
        outcomes = {name: {} for name in pools.figures}
        any_hit = 0
        for run in runs:
            verdict = judge(pools, before(pools.clean, run, settings.k), run, settings)
            for name, o in verdict.items():
                per_fig[name] += o == "regressed"
                outcomes[name][o] = outcomes[name].get(o, 0) + 1
            any_hit += any(o == "regressed" for o in verdict.values())
        out[drop] = {"runs": len(runs), "per_figure": per_fig, "any": any_hit,
                     "outcomes": outcomes}
    return out


def band_detection(pools: Pools, tol: float) -> dict[int, dict]:
    out = {}
    for drop, runs in pools.degraded.items():
        per_fig = dict.fromkeys(pools.figures, 0)
        for run in runs:
            ref = before(pools.clean, run, 1)[0]
            for name, hit in band_regressed(pools, ref, run, tol).items():
                per_fig[name] += hit
        out[drop] = {"runs": len(runs), "per_figure": per_fig}
    return out


def sustained_trial(pools: Pools, history: list[Run], new: list[Run],
                    settings: JudgingSettings) -> dict[str, int | None]:
    """Runs after the start of ``new`` until each figure is flagged (1-based), or None.
    Each new run is judged as a whole (all figures, corrected), against the last K
    accepted runs; a run that flags nothing is accepted into the baseline. The
    sustained rule looks at the run medians of the accepted history plus the new
    runs so far, corrected across figures too."""
    names = list(pools.figures)
    first: dict[str, int | None] = dict.fromkeys(names)
    accepted = list(history)
    medians = {n: [median(r["figures"][n]) for r in history] for n in names}
    for j, run in enumerate(new, start=1):
        data = {n: FigureData([r["figures"][n] for r in accepted[-settings.for_figure(n).k:]],
                              run["figures"][n], pools.figures[n]["better"]) for n in names}
        verdicts = judge_run(data, settings)
        for n in names:
            medians[n].append(median(run["figures"][n]))
        flagged = sustained_run({n: (medians[n], pools.figures[n]["better"]) for n in names},
                                settings)
        hit = False
        for n in names:
            if first[n] is None and (verdicts[n].outcome == "regressed" or n in flagged):
                first[n] = j
                hit = True
        if not hit:
            accepted.append(run)
    return first


def band_trial(pools: Pools, name: str, reference: Run, new: list[Run], tol: float) -> int | None:
    for j, run in enumerate(new, start=1):
        if band_regressed(pools, reference, run, tol)[name]:
            return j
    return None


def sustained(pools: Pools, settings: JudgingSettings, history_len: int, steps: int,
              trials: int, seed: int, names: Sequence[str] | None = None,
              drops: Sequence[int] | None = None) -> dict:
    """Runs-until-flagged per level and figure over ``trials`` seeded trials; level 0 is
    clean runs after clean runs (the rule's false alarms)."""
    rng = random.Random(seed)
    out: dict = {}
    levels = {0: pools.clean, **pools.degraded}
    for drop, pool in levels.items():
        if drops is not None and drop not in drops:
            continue
        use = list(names or pools.figures)
        res: dict[str, dict] = {n: {"new": [], "band5": [], "band10": []} for n in use}
        for _ in range(trials):
            if drop == 0:
                order = rng.sample(pools.clean, len(pools.clean))
                n_hist = min(history_len, len(order) - steps)
                history, new = order[:n_hist], order[n_hist:n_hist + steps]
            else:
                history = rng.sample(pools.clean, min(history_len, len(pools.clean)))
                new = rng.sample(pool, min(steps, len(pool)))
            first = sustained_trial(pools, history, new, settings)
            hits = [v for v in first.values() if v is not None]
            res.setdefault("__any__", {"new": []})["new"].append(min(hits) if hits else None)
            for name in use:
                res[name]["new"].append(first[name])
                res[name]["band5"].append(band_trial(pools, name, history[-1], new, 0.05))
                res[name]["band10"].append(band_trial(pools, name, history[-1], new, 0.10))
        out[drop] = res
    return out


def within(counts: list[int | None], n: int) -> int:
    return sum(1 for c in counts if c is not None and c <= n)


def replay_rates(pools: Pools, settings: JudgingSettings, trials: int, seed: int) -> dict:
    """Single-run rates over random draws: a baseline of K clean runs, then one clean
    run (false alarms, per run over all figures) or one degraded run (detections, per
    figure)."""
    rng = random.Random(seed)
    k = settings.k
    false_runs = 0
    for _ in range(trials):
        runs = rng.sample(pools.clean, k + 1)
        verdict = judge(pools, runs[:k], runs[k], settings)
        false_runs += any(o == "regressed" for o in verdict.values())
    out: dict = {"false_run_rate": false_runs / trials, "detect": {}}
    for drop, pool in pools.degraded.items():
        hits = dict.fromkeys(pools.figures, 0)
        for _ in range(trials):
            verdict = judge(pools, rng.sample(pools.clean, k), rng.choice(pool), settings)
            for name, o in verdict.items():
                hits[name] += o == "regressed"
        out["detect"][drop] = {n: h / trials for n, h in hits.items()}
    return out


# --------------------------------------------------------------------------- oracle
def oracle(pools: Pools, level: Sequence[Run], current: Run, alpha: float = 0.05,
           threshold: float = 0.05) -> dict[str, str]:
    """The limit: the spread and the correlation known from all clean runs, the
    level from the same last K runs, one test per family (Stouffer, the same
    share with the smallest figure, Holm across families and within), normal
    quantiles. Returns regressed / pass per figure."""
    import numpy as np
    from scipy import stats

    from hpcval.history.judging import effective_figures, family_name, holm, holm_levels, stouffer
    from hpcval.history.judging.model import MEAN_SHARE

    names = list(pools.figures)
    logs = {n: np.log([median(r["figures"][n]) for r in pools.clean]) for n in names}
    sd = {n: float(np.std(v, ddof=1)) for n, v in logs.items()}
    k = len(level)
    p = {}
    for n in names:
        sign = -1.0 if pools.figures[n]["better"] == "higher" else 1.0
        diff = np.log(median(current["figures"][n])) - np.mean(
            [np.log(median(r["figures"][n])) for r in level])
        p[n] = float(stats.norm.sf(sign * diff / (sd[n] * np.sqrt(1 + 1 / k))))
    fams: dict[str, list[str]] = {}
    for n, meta in pools.figures.items():
        fams.setdefault(family_name(meta["unit"], meta["better"]), []).append(n)
    fam_p = {}
    for f, members in fams.items():
        sign = np.array([1.0 if pools.figures[m]["better"] == "lower" else -1.0
                         for m in members])
        corr = np.corrcoef([logs[m] for m in members]) * np.outer(sign, sign) \
            if len(members) > 1 else None
        z = [float(stats.norm.isf(max(p[m], 1e-300))) for m in members]
        pm = float(stats.norm.sf(stouffer(z, corr)))
        share = MEAN_SHARE
        fam_p[f] = p[members[0]] if len(members) == 1 else min(
            1.0, pm / share, len(members) * min(p[m] for m in members) / (1 - share))
    keys = list(fams)
    adj = dict(zip(keys, holm([fam_p[f] for f in keys]), strict=True))
    lv = dict(zip(keys, holm_levels([fam_p[f] for f in keys], alpha), strict=True))
    out = dict.fromkeys(names, "pass")
    for f, members in fams.items():
        if adj[f] >= alpha:
            continue
        corr = np.corrcoef([logs[m] for m in members]) if len(members) > 1 else None
        if corr is not None:
            sign = np.array([1.0 if pools.figures[m]["better"] == "lower" else -1.0
                             for m in members])
            corr = corr * np.outer(sign, sign)
        n_eff = effective_figures(len(members), corr)
        within = dict(zip(members, holm_levels([p[m] for m in members], 1.0, n_eff),
                          strict=True))
        for m in members:
            worse = 1 - median(current["figures"][m]) / np.exp(np.mean(
                [np.log(median(r["figures"][m])) for r in level]))
            if pools.figures[m]["better"] == "lower":
                worse = -worse
            if p[m] < lv[f] * within[m] and worse >= threshold:
                out[m] = "regressed"
    return out


def against_oracle(pools: Pools, settings: JudgingSettings, trials: int, seed: int,
                   window: int) -> tuple[str, dict]:
    """hpcval / oracle on the same draws: false regressed or unstable per clean run
    (each clean run against the clean runs before it, cyclically; and random
    replays), and single-run `regressed` per figure for each degraded level.
    ``window``: accepted runs hpcval's spread may use (5: a new site)."""
    rng = random.Random(seed)
    k = settings.k
    window = min(window, len(pools.clean) - 1)
    bad = ("regressed", "unstable")
    names = list(pools.figures)
    res: dict = {"window": window}
    fh = fo = 0
    for run in pools.clean:
        base = before(pools.clean, run, window)
        fh += any(o in bad for o in judge(pools, base, run, settings).values())
        fo += any(o == "regressed" for o in oracle(pools, base[-k:], run).values())
    res["false_trials"] = (fh, fo, len(pools.clean))
    rh = ro = 0
    for _ in range(trials):
        runs = rng.sample(pools.clean, window + 1)
        rh += any(o in bad for o in judge(pools, runs[:-1], runs[-1], settings).values())
        ro += any(o == "regressed" for o in oracle(pools, runs[:-1][-k:], runs[-1]).values())
    res["false_replays"] = (rh / trials, ro / trials)
    res["single"] = {}
    for drop, pool in pools.degraded.items():
        hits = {n: [0, 0] for n in names}
        for run in pool:
            base = before(pools.clean, run, window)
            h = judge(pools, base, run, settings)
            o = oracle(pools, base[-k:], run)
            for n in names:
                hits[n][0] += h[n] == "regressed"
                hits[n][1] += o[n] == "regressed"
        res["single"][drop] = (hits, len(pool))
    # the same by random draws: a baseline of ``window`` clean runs, one run of the level
    res["single_replays"] = {}
    for drop, pool in pools.degraded.items():
        hits = {n: [0, 0] for n in names}
        for _ in range(trials):
            base = rng.sample(pools.clean, window)
            run = rng.choice(pool)
            h = judge(pools, base, run, settings)
            o = oracle(pools, base[-k:], run)
            for n in names:
                hits[n][0] += h[n] == "regressed"
                hits[n][1] += o[n] == "regressed"
        res["single_replays"][drop] = {n: (a / trials, b / trials) for n, (a, b) in hits.items()}
    lines = [f"hpcval / oracle, spread window {window} runs, K = {k}:", "",
             "| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    fh, fo, n = res["false_trials"]
    lines.append(f"| clean runs with a false `regressed`/`unstable` (any figure) | "
                 f"{fh}/{n} / {fo}/{n} (replays {res['false_replays'][0]:.1%} / "
                 f"{res['false_replays'][1]:.1%}) |" + " |" * (len(names) - 1))
    for drop, (hits, m) in res["single"].items():
        lines.append(f"| -{drop} %: `regressed` on the run | "
                     + " | ".join(f"{hits[x][0]}/{m} / {hits[x][1]}/{m}" for x in names) + " |")
    for drop, rates in res["single_replays"].items():
        lines.append(f"| -{drop} %: `regressed`, {trials} replays | "
                     + " | ".join(f"{rates[x][0]:.0%} / {rates[x][1]:.0%}" for x in names)
                     + " |")
    return "\n".join(lines), res


# --------------------------------------------------------------------------- sustained
def _flags(pools: Pools, accepted: list[Run], run: Run, settings: JudgingSettings,
           rule: str, window: int) -> tuple[set[str], set[str]]:
    """Figures flagged at ``run`` by the single-run verdicts (`regressed` or
    `unstable`) and by the sustained rule ``rule`` ("cusum" or "pelt"), given the
    accepted runs; ``rule = "oracle"``: the oracle's single-run verdicts and the
    same CUSUM on scores standardized by the mean, spread and correlation of all
    clean runs."""
    from hpcval.history.judging import families, sustained_families

    names = list(pools.figures)
    if rule == "oracle":
        single = {n for n, o in oracle(pools, accepted[-settings.k:], run).items()
                  if o == "regressed"}
        return single, oracle_cusum(pools, [*accepted, run], settings)
    base = accepted[-window:]
    data = {n: FigureData([r["figures"][n] for r in base], run["figures"][n],
                          pools.figures[n]["better"], pools.figures[n]["unit"]) for n in names}
    verdicts = judge_run(data, settings)
    single = {n for n, v in verdicts.items() if v.outcome in ("regressed", "unstable")}
    if rule == "cusum":  # each figure's runs through the statistic its verdict judged
        medians = {n: (_run_values(verdicts[n], [r["figures"][n] for r in accepted]
                                   + [run["figures"][n]], data[n].baseline_runs,
                                   settings.for_figure(n).alpha),
                       pools.figures[n]["better"]) for n in names}
    else:
        medians = {n: ([median(r["figures"][n]) for r in accepted]
                       + [median(run["figures"][n])], pools.figures[n]["better"])
                   for n in names}
    if rule == "cusum":
        rule_hits = set(sustained_families(families(data, settings), medians, settings))
    else:
        rule_hits = set(sustained_run(medians, settings))
    return single, rule_hits


def _run_values(verdict: object, runs: list[list[float]], baseline: Sequence[Sequence[float]],
                alpha: float) -> list[float]:
    """What ``hpcval validate`` hands the sustained rule (``run.verdicts._medians``):
    the runs' values of the statistic the verdict judged, runs whose fast level
    is unknown left out, nothing when the current run is one."""
    from hpcval.history.judging.modes import run_values

    share = getattr(verdict, "slow_share", None)
    values = run_values(runs, getattr(verdict, "better", "higher"),
                        getattr(verdict, "statistic", "median"),
                        share.get("split") if isinstance(share, dict) else None, baseline, alpha)
    return [] if values[-1] is None else [v for v in values if v is not None]


def oracle_cusum(pools: Pools, runs: Sequence[Run], settings: JudgingSettings) -> set[str]:
    """Figures flagged at the last of ``runs`` by Page's CUSUM (the same k and h as
    hpcval's) on each family's mean score, the scores standardized by the mean and
    sd of all clean runs' log medians and the mean's sd by their correlation; a
    flagged family names its figures worse by the threshold since the CUSUM left 0."""
    import numpy as np

    from hpcval.history.judging import cusum, family_name
    from hpcval.history.judging.changes import CUSUM_H

    names = list(pools.figures)
    clean = {n: np.log([median(r["figures"][n]) for r in pools.clean]) for n in names}
    logs = {n: np.log([median(r["figures"][n]) for r in runs]) for n in names}
    fams: dict[str, list[str]] = {}
    for n, meta in pools.figures.items():
        fams.setdefault(family_name(meta["unit"], meta["better"]), []).append(n)
    out: set[str] = set()
    for members in fams.values():
        sign = np.array([1.0 if pools.figures[m]["better"] == "lower" else -1.0
                         for m in members])
        z = np.array([sign[i] * (logs[m] - clean[m].mean()) / clean[m].std(ddof=1)
                      for i, m in enumerate(members)])
        if len(members) > 1:
            corr = np.corrcoef([clean[m] for m in members]) * np.outer(sign, sign)
            var = min(max(float(np.sum(corr)) / len(members) ** 2, 1 / len(members)), 1.0)
        else:
            var = 1.0
        path = cusum(z.mean(axis=0) / np.sqrt(var))
        if not path or path[-1] <= CUSUM_H:
            continue
        since = next((i for i in range(len(path) - 1, -1, -1) if path[i] == 0.0), -1)
        after = len(path) - 1 - since
        for i, m in enumerate(members):
            before, now = logs[m][:-after], logs[m][-after:]
            if before.size and sign[i] * (now.mean() - before.mean()) >= -np.log1p(
                    -settings.for_figure(m).threshold):
                out.add(m)
    return out


def sustained_rates(pools: Pools, settings: JudgingSettings, trials: int, seed: int,
                    rule: str, history_len: int = 12, steps: int = 8,
                    window: int = 30) -> dict:
    """Per level: trials (``history_len`` clean runs, then ``steps`` runs of the level
    in random order) in which each figure is flagged within 5 runs; for clean runs
    (level 0) the flags per 100 new runs per family (a flagged run is left out
    of the accepted runs, as `hpcval validate` does)."""
    from hpcval.history.judging import family_name

    rng = random.Random(seed)
    names = list(pools.figures)
    fam = {n: family_name(pools.figures[n]["unit"], pools.figures[n]["better"])
           for n in names}
    out: dict = {}
    for drop, pool in {0: pools.clean, **pools.degraded}.items():
        within5 = dict.fromkeys(names, 0)
        fam_flags = dict.fromkeys(set(fam.values()), 0)
        rule_flags = dict.fromkeys(set(fam.values()), 0)
        new_runs = 0
        for _ in range(trials):
            if drop == 0:
                order = rng.sample(pools.clean, len(pools.clean))
                history, new = order[:history_len], order[history_len:history_len + steps]
            else:
                history = rng.sample(pools.clean, history_len)
                new = [rng.choice(pool) for _ in range(steps)]
            accepted = list(history)
            first: dict[str, int] = {}
            for j, run in enumerate(new, start=1):
                single, by_rule = _flags(pools, accepted, run, settings, rule, window)
                hit = single | by_rule
                new_runs += 1
                for f in {fam[n] for n in hit}:
                    fam_flags[f] += 1
                for f in {fam[n] for n in by_rule - single}:
                    rule_flags[f] += 1
                for n in hit:
                    first.setdefault(n, j)
                if not hit:
                    accepted.append(run)
            for n in names:
                within5[n] += n in first and first[n] <= 5
        out[drop] = {"within5": within5, "trials": trials,
                     "flags_per_100": {f: 100 * c / new_runs for f, c in fam_flags.items()},
                     "rule_per_100": {f: 100 * c / new_runs for f, c in rule_flags.items()}}
    return out


def sustained_table(pools: Pools, settings: JudgingSettings, seed: int,
                    replays: int) -> tuple[str, dict]:
    """Each cell: hpcval (single-run verdicts + CUSUM) / the oracle (its
    single-run verdicts + the CUSUM on known-spread scores) / hpcval's single-run
    verdicts + the previous rule, PELT + Welch; 10 trials, replays in parentheses."""
    names = list(pools.figures)
    rules = ("cusum", "oracle", "pelt")
    res = {rule: (sustained_rates(pools, settings, 10, seed, rule),
                  sustained_rates(pools, settings, replays, seed + 1, rule))
           for rule in rules}
    lines = ["sustained drops (12 clean runs, then 8 runs of one level; single-run verdicts "
             "plus the sustained rule; hpcval with CUSUM / oracle / hpcval with PELT + Welch; "
             f"10 trials ({replays} replays)):", "",
             "| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]

    def per_family(key: str) -> str:
        fams = sorted(res["cusum"][0][0][key])
        return "; ".join(
            f"{f} " + " / ".join(f"{res[r][0][0][key][f]:.1f}" for r in rules)
            + " (" + " / ".join(f"{res[r][1][0][key][f]:.1f}" for r in rules) + ")"
            for f in fams)

    for drop in res["cusum"][0]:
        if drop == 0:
            lines.append("| clean: flags per 100 runs per family | " + per_family("flags_per_100")
                         + " |" + " |" * (len(names) - 1))
            lines.append("| clean: flags of the sustained rule alone per 100 runs per family | "
                         + per_family("rule_per_100") + " |" + " |" * (len(names) - 1))
            continue
        cells = []
        for n in names:
            tri = " / ".join(f"{res[r][0][drop]['within5'][n]}/10" for r in rules)
            rep = " / ".join(f"{res[r][1][drop]['within5'][n] / replays:.0%}" for r in rules)
            cells.append(f"{tri} ({rep})")
        lines.append(f"| -{drop} %: flagged within 5 runs | " + " | ".join(cells) + " |")
    return "\n".join(lines), res


# --------------------------------------------------------------------------- run length
def run_length(seed: int, series: int = 200, sd: float = 0.07) -> str:
    """The CUSUM's run length between false flags and its delay, on seeded normal
    series of log run medians (sd ``sd``; the lab's bw_1MiB: 0.066): clean series of
    400 runs (average run length from censored first flags: runs watched / flags),
    and 15 clean runs followed by 10 % and 20 % drops (runs until flagged)."""
    import numpy as np

    from hpcval.history.judging import cusum, cusum_scores
    from hpcval.history.judging.changes import CUSUM_START

    def first(values: np.ndarray, h: float) -> int | None:
        path = cusum(cusum_scores(values, "higher"))
        return next((i + CUSUM_START for i, v in enumerate(path) if v > h), None)

    rng = np.random.default_rng(seed)
    lines = [f"CUSUM on seeded series (sd {sd:.0%} of log run medians, {series} series "
             "each; k = 0.5):", "",
             "| h | clean runs between false flags | -10 %: flagged within 5 runs "
             "(median delay) | -20 %: within 5 runs (median delay) |", "|---|---|---|---|"]
    clean = [rng.normal(0, sd, 400) for _ in range(series)]
    drops = {d: [np.concatenate([rng.normal(0, sd, 15), rng.normal(np.log(1 - d / 100), sd, 12)])
                 for _ in range(series)] for d in (10, 20)}
    for h in (4.0, 5.0):
        alarms = [first(x, h) for x in clean]
        watched = sum(a - CUSUM_START if a is not None else 400 - CUSUM_START for a in alarms)
        flags = sum(a is not None for a in alarms)
        arl = f"{watched / flags:.0f}" if flags else f"> {watched}"
        cells = []
        for xs in drops.values():
            delays = []
            for x in xs:
                a = first(x, h)
                # a flag before the drop is a false one: counted as not detected
                delays.append(a - 15 + 1 if a is not None and a >= 15 else None)
            hit = [x for x in delays if x is not None]
            cells.append(f"{sum(1 for x in hit if x <= 5) / series:.0%} "
                         f"({statistics.median(hit):g})" if hit else "0 %")
        lines.append(f"| {h:g} | {arl} ({flags} flags in {watched} runs) | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- noise
def noise(pools: Pools) -> dict[str, dict]:
    """Run-to-run CV of run medians, within-run CV, variance components and a
    normality test of log medians, for the clean runs."""
    import numpy as np
    from scipy import stats

    out = {}
    for name in pools.figures:
        logs = [np.log(np.asarray(r["figures"][name])) for r in pools.clean]
        med = np.array([np.median(x) for x in logs])
        within_var = float(np.mean([np.var(x, ddof=1) for x in logs]))
        n = float(np.mean([x.size for x in logs]))
        # one-way random effects (ANOVA estimator) on log samples
        means = np.array([x.mean() for x in logs])
        between_ms = n * float(np.var(means, ddof=1))
        between_var = max((between_ms - within_var) / n, 0.0)
        icc = between_var / (between_var + within_var) if between_var + within_var else 0.0
        raw = np.array([np.median(r["figures"][name]) for r in pools.clean])
        shapiro = stats.shapiro(med) if med.size >= 3 else None
        # naive test: pool the samples of two clean runs as independent (Welch on samples)
        naive_sig = 0
        pairs = 0
        for i in range(len(logs)):
            for j in range(i + 1, len(logs)):
                pairs += 1
                naive_sig += stats.ttest_ind(logs[i], logs[j], equal_var=False).pvalue < 0.05
        out[name] = {
            "median": float(np.median(raw)),
            "cv_runs": float(np.std(raw, ddof=1) / np.mean(raw)),
            "sd_log_medians": float(np.std(med, ddof=1)),
            "within_sd_log": float(np.sqrt(within_var)),
            "between_sd_log": float(np.sqrt(between_var)),
            "icc": icc,
            "shapiro_p": float(shapiro.pvalue) if shapiro is not None else None,
            "naive_pairs_significant": naive_sig / pairs if pairs else None,
        }
    return out


def calibration(pools: Pools, k: int, trials: int, seed: int) -> dict[str, float]:
    """Share of clean runs whose one-sided p (worse direction, no threshold, no
    correction) is below 0.05 against K other random clean runs: 0.05 if the
    prediction interval is right, far more if it is too narrow."""
    from hpcval.history.judging import FigureSettings, judge_figure

    rng = random.Random(seed)
    fs = FigureSettings(k=k, threshold=0.0)
    out = {}
    for name, meta in pools.figures.items():
        low = 0
        for _ in range(trials):
            runs = rng.sample(pools.clean, k + 1)
            v = judge_figure([r["figures"][name] for r in runs[:k]], runs[k]["figures"][name],
                             meta["better"], fs)
            low += v.worse_by is not None and v.worse_by > 0 and v.p_value < 0.05
        out[name] = low / trials
    return out


def level_shift(pools: Pools) -> dict[int, dict[str, float]]:
    """Median of degraded runs' medians relative to the clean runs' (expected: -drop)."""
    out = {}
    for drop, runs in pools.degraded.items():
        out[drop] = {}
        for name in pools.figures:
            clean = median([median(r["figures"][name]) for r in pools.clean])
            deg = median([median(r["figures"][name]) for r in runs])
            out[drop][name] = deg / clean - 1
    return out


# --------------------------------------------------------------------------- report
def report(pools: Pools, settings: JudgingSettings, trials: int, seed: int,
           history_len: int = 12) -> tuple[str, dict]:
    lines: list[str] = []
    names = list(pools.figures)
    summary: dict = {"settings": {"k": settings.k, "threshold": settings.threshold,
                                  "alpha": settings.alpha, "correction": settings.correction},
                     "clean_runs": len(pools.clean),
                     "degraded_runs": {d: len(r) for d, r in pools.degraded.items()}}
    text, nz, cal = noise_table(pools, settings, trials, seed)
    summary["noise"], summary["calibration"] = nz, cal
    lines.append(text)
    shift = level_shift(pools)
    summary["level_shift"] = shift
    lines.append("")
    lines.append("level of degraded runs vs clean (median of run medians):")
    lines.append("| link rate | " + " | ".join(names) + " |")
    lines.append("|---" * (len(names) + 1) + "|")
    for drop, vals in shift.items():
        lines.append(f"| -{drop} % | " + " | ".join(f"{vals[n]:+.1%}" for n in names) + " |")

    lines.append("")
    lines.append("bw_1MiB / (link rate x (1 - competing share)), median per level "
                 "(1.00: the figure is the bandwidth left to it on the link):")
    eff = {}
    for drop, runs in {0: pools.clean, **pools.degraded}.items():
        eff[drop] = median([median(r["figures"]["bw_1MiB"])
                            / (r["rate_mbit"] / 8 * (1 - r["background_share"])) for r in runs])
    summary["efficiency"] = eff
    lines.append(" | ".join(f"-{d} %: {e:.3f}" for d, e in eff.items()))

    fa = false_alarms(pools, settings)
    b5, b10 = band_false(pools, 0.05), band_false(pools, 0.10)
    det = single_detection(pools, settings)
    d5, d10 = band_detection(pools, 0.05), band_detection(pools, 0.10)
    sus = sustained(pools, settings, history_len, 6, 10, seed)
    sus_many = sustained(pools, settings, history_len, 6, trials, seed + 1)
    summary.update({"false_alarms": fa, "band5_false": b5, "band10_false": b10,
                    "single": det, "band5_single": d5, "band10_single": d10})

    lines.append("")
    lines.append(f"false `regressed` in clean runs (each judged against the {settings.k} "
                 "clean runs before it; runs with any false regressed, over all figures): "
                 f"new verdicts {fa['runs_with_false']}/{fa['runs']}, band 5 % "
                 f"{b5['runs_with_false']}/{b5['runs']}, band 10 % "
                 f"{b10['runs_with_false']}/{b10['runs']}")
    lines.append(f"outcomes of the clean runs' figures: {fa['outcomes']}")
    rep = replay_rates(pools, settings, trials, seed)
    summary["replay"] = rep
    lines.append(f"replays ({trials}): clean runs with any false `regressed` "
                 f"{rep['false_run_rate']:.1%}; single-run `regressed` per figure: "
                 + "; ".join(f"-{d} %: " + ", ".join(f"{n} {r:.0%}" for n, r in v.items())
                             for d, v in rep["detect"].items()))
    any10, anym = sus[0]["__any__"]["new"], sus_many[0]["__any__"]["new"]
    lines.append(f"false flags (verdicts + change points, any figure) within 6 clean runs "
                 f"after {history_len}: {within(any10, 6)}/10 trials, "
                 f"{within(anym, 6) / trials:.0%} of {trials} replays")
    summary["false_flag_any"] = {"trials10": within(any10, 6),
                                 "replay": within(anym, 6) / trials}
    for name in names:
        lines.append("")
        lines.append(f"### {name} ({pools.figures[name]['unit']}, "
                     f"{pools.figures[name]['better']} is better)")
        lines.append("")
        lines.append("| | new verdicts | band +-5 % | band +-10 % |")
        lines.append("|---|---|---|---|")
        lines.append(f"| false `regressed` per clean run | {fa['per_figure'][name]}/{fa['runs']} "
                     f"| {b5['per_figure'][name]}/{b5['runs']} "
                     f"| {b10['per_figure'][name]}/{b10['runs']} |")
        fa_rule = sus[0][name]
        fa_rule_many = sus_many[0][name]
        lines.append(
            "| false flag within 6 clean runs (verdicts + change points; replays) | "
            f"{within(fa_rule['new'], 6)}/10 "
            f"({within(fa_rule_many['new'], 6) / trials:.0%}) | "
            f"{within(fa_rule['band5'], 6)}/10 ({within(fa_rule_many['band5'], 6) / trials:.0%}) | "
            f"{within(fa_rule['band10'], 6)}/10 "
            f"({within(fa_rule_many['band10'], 6) / trials:.0%}) |")
        for drop in pools.degraded:
            s = det[drop]
            lines.append(
                f"| -{drop} %: `regressed` on the run (single-run) | "
                f"{s['per_figure'][name]}/{s['runs']} | {d5[drop]['per_figure'][name]}/"
                f"{d5[drop]['runs']} | {d10[drop]['per_figure'][name]}/{d10[drop]['runs']} |")
        for drop in pools.degraded:
            c, cm = sus[drop][name], sus_many[drop][name]
            cells = []
            for key in ("new", "band5", "band10"):
                hits = [x for x in c[key] if x is not None]
                med = f"median {statistics.median(hits):g}" if hits else "never"
                cells.append(f"{within(c[key], 1)}/{within(c[key], 3)}/{within(c[key], 6)} "
                             f"of 10, {med} ({within(cm[key], 3) / trials:.0%} within 3)")
            lines.append(f"| -{drop} % sustained: flagged within 1/3/6 runs | "
                         + " | ".join(cells) + " |")
        summary.setdefault("sustained", {})[name] = {
            str(d): {k: {"within1": within(v, 1), "within3": within(v, 3),
                         "within6": within(v, 6),
                         "replay_within1": within(sus_many[d][name][k], 1) / trials,
                         "replay_within3": within(sus_many[d][name][k], 3) / trials,
                         "replay_within6": within(sus_many[d][name][k], 6) / trials}
                     for k, v in sus[d][name].items()}
            for d in sus}
    return "\n".join(lines), summary


def noise_table(pools: Pools, settings: JudgingSettings, trials: int, seed: int
                ) -> tuple[str, dict, dict]:
    """The clean runs' noise: spread between and within runs, normality, what a
    pooled-sample test makes of them, and the calibration of hpcval's p."""
    names = list(pools.figures)
    nz = noise(pools)
    cal = calibration(pools, settings.k, trials, seed)
    corr = correlations(pools)
    lines = [f"clean runs: {len(pools.clean)}; degraded: "
             + ", ".join(f"{d}%: {len(r)}" for d, r in pools.degraded.items()), "",
             "| figure | clean median | run-to-run CV | within-run sd (log) | "
             "between-run sd (log) | between share | Shapiro p (log medians) | "
             "pairs of clean runs 'different' by a pooled-sample t-test | "
             f"clean runs with p < 0.05 against {settings.k} others (nominal 5 %) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in names:
        z = nz[name]
        unit = pools.figures[name]["unit"]
        lines.append(f"| {name} | {z['median']:.4g} {unit} | {z['cv_runs']:.1%} | "
                     f"{z['within_sd_log']:.3f} | {z['between_sd_log']:.3f} | {z['icc']:.0%} | "
                     f"{z['shapiro_p']:.2f} | {z['naive_pairs_significant']:.0%} | "
                     f"{cal[name]:.1%} |")
    lines += ["", "run-to-run correlation of log run medians (clean runs):", "",
              "| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    lines += [f"| {a} | " + " | ".join(f"{corr[a][b]:+.2f}" for b in names) + " |"
              for a in names]
    return "\n".join(lines), nz, cal


def correlations(pools: Pools) -> dict[str, dict[str, float]]:
    import numpy as np

    names = list(pools.figures)
    logs = np.log([[median(r["figures"][n]) for r in pools.clean] for n in names])
    c = np.corrcoef(logs)
    return {a: {b: float(c[i, j]) for j, b in enumerate(names)} for i, a in enumerate(names)}


def sensitivity(pools: Pools, trials: int, seed: int, history_len: int,
                figure: str = "bw_1MiB") -> tuple[str, dict]:
    """How K and the correction change the rates (replays), for one figure."""
    lines = [f"sensitivity ({figure}, {trials} replays each): false = clean runs with any "
             "false `regressed` over all figures; detect = single-run `regressed`; "
             "sustained = flagged within 3 runs (-10 %) / 6 runs (-5 %), of 100 trials",
             "",
             "| K | correction | false per clean run | detect -10 % | detect -20 % "
             "| -10 % within 3 | -5 % within 6 | false flag within 6 clean runs |",
             "|---|---|---|---|---|---|---|---|"]
    out = {}
    for k in (5, 10):
        for correction in ("holm", "bh"):
            settings = JudgingSettings(k=k, correction=correction)
            rates = replay_rates(pools, settings, trials, seed)
            sus = sustained(pools, settings, max(history_len, k + 2), 6, 100, seed,
                            names=[figure], drops=[0, 5, 10])
            row = {
                "false": rates["false_run_rate"],
                "d10": rates["detect"].get(10, {}).get(figure),
                "d20": rates["detect"].get(20, {}).get(figure),
                "s10": within(sus[10][figure]["new"], 3) / 100 if 10 in sus else None,
                "s5": within(sus[5][figure]["new"], 6) / 100 if 5 in sus else None,
                "s0": within(sus[0][figure]["new"], 6) / 100,
            }
            out[f"k{k}-{correction}"] = row
            lines.append(f"| {k} | {correction} | " + " | ".join(
                "-" if row[c] is None else f"{row[c]:.1%}"
                for c in ("false", "d10", "d20", "s10", "s5", "s0")) + " |")
    return "\n".join(lines), out


def shapes_table(trials: int, seed: int) -> str:
    """Simulated noise shapes beside the recordings (bench/noise_shapes.py): false
    alarms per clean run, detection of a 20 % drop and of a vanished fast mode,
    each beside the oracle that knows the noise model."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import noise_shapes

    lines = ["Simulated noise shapes (30 clean runs of history, 8 samples per run, site "
             "defaults): false alarms | 20 % drop: hpcval / oracle | fast mode gone: hpcval "
             "/ oracle"]
    for i, shape in enumerate(noise_shapes.SHAPES):
        r = noise_shapes.evaluate(shape, trials, 30, 8, seed + i)
        gone = r.get("fast mode gone")
        lines.append(f"  {shape:14} {r['clean']['alarm']:6.1%} | {r['drop 20 %']['alarm']:6.1%}"
                     f" / {r['drop 20 %']['oracle']:6.1%} | "
                     + (f"{gone['alarm']:6.1%} / {gone['oracle']:6.1%}" if gone else "-"))
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    if args.shapes:
        print(shapes_table(args.trials, args.seed))
        print()
        if not args.data:
            return 0
    pools = load(args.data)
    settings = JudgingSettings(k=args.k, threshold=args.threshold, alpha=args.alpha,
                               correction=args.correction)
    if args.noise:
        print(noise_table(pools, settings, args.trials, args.seed)[0])
        print()
    for window in (settings.k, 30):
        text, _ = against_oracle(pools, settings, args.trials, args.seed, window)
        print(text)
        print()
    if args.oracle_only:
        return 0
    if args.run_length:
        print(run_length(args.seed))
        print()
    text, _ = sustained_table(pools, settings, args.seed, args.replays)
    print(text)
    print()
    if args.no_report:
        return 0
    text, summary = report(pools, settings, args.trials, args.seed, args.history)
    print(text)
    if args.sensitivity:
        text, summary["sensitivity"] = sensitivity(pools, args.trials, args.seed, args.history)
        print()
        print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1, default=str) + "\n")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", nargs="*", help="recorded runs (bench/detection.py record)")
    p.add_argument("--shapes", action="store_true",
                   help="also simulated noise shapes (two-moded, heavy tails, drift: "
                   "bench/noise_shapes.py); alone when no recording is given")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--threshold", type=float, default=0.05)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--correction", default="holm", choices=["holm", "bh"])
    p.add_argument("--history", type=int, default=12,
                   help="clean runs before a sustained drop in the trials")
    p.add_argument("--trials", type=int, default=500)
    p.add_argument("--seed", type=int, default=14)
    p.add_argument("--json", help="also write the numbers here")
    p.add_argument("--replays", type=int, default=100,
                   help="random replays of the sustained trials")
    p.add_argument("--no-report", action="store_true",
                   help="only the hpcval / oracle and sustained tables")
    p.add_argument("--oracle-only", action="store_true",
                   help="only the hpcval / oracle tables")
    p.add_argument("--noise", action="store_true",
                   help="also the noise table of the clean runs first")
    p.add_argument("--run-length", action="store_true",
                   help="also the CUSUM's run length and delay on seeded series")
    p.add_argument("--sensitivity", action="store_true",
                   help="also compare K = 5 / 10 and holm / bh by replays")
    return p


if __name__ == "__main__":
    raise SystemExit(main(parser().parse_args()))
