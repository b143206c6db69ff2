"""Run-set comparison: the statistics (hpcval.history.judging.compare) on seeded and
recorded lab runs, and ``hpcval compare`` on a stored history with tags,
environments and one run per side."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from history_maker import CASES, Case, Change, Fig, make_site, write_run
from scipy import stats

from hpcval.history.judging import JudgingSettings
from hpcval.history.judging.compare import (
    FigurePair,
    compare_sets,
    runs_needed,
    runs_to_detect,
    welch,
)
from hpcval.history.runsets import Side, parse_time, resolve, size_of, split_case
from hpcval.history.store import Store
from hpcval.reporting.report import load_run_report
from hpcval.run.verdicts import store_and_judge

DATA = Path(__file__).resolve().parents[1] / "data" / "judging"
CASE = "imb_pingpong_internode_check@lab:lab+impi"


def _lab(drop_a: int, drop_b: int, n: int, offset: int = 0) -> dict[str, FigurePair]:
    data = json.loads((DATA / "lab-pingpong.json").read_text())
    runs = {d: [r for r in data["runs"] if r["drop_pct"] == d] for d in (drop_a, drop_b)}
    a = runs[drop_a][:n]
    b = runs[drop_b][offset:offset + n] if drop_a != drop_b else runs[drop_b][n:2 * n]
    return {f"{CASE}/{f}": FigurePair([r["figures"][f] for r in a], [r["figures"][f] for r in b],
                                      m["better"], m["unit"], m["size"],
                                      [str(r["index"]) for r in a], [str(r["index"]) for r in b])
            for f, m in data["figures"].items()}


def test_welch_is_scipys_welch_when_no_floor_applies() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.normal(0, 0.07, 6), rng.normal(-0.2, 0.03, 4)
    w = welch(a, b)
    ref = stats.ttest_ind(b, a, equal_var=False)
    assert math.isclose(w.diff / w.se, ref.statistic, rel_tol=1e-9)
    assert math.isclose(w.df, ref.df, rel_tol=1e-9)
    lo, hi = w.interval(0.95)
    ci = ref.confidence_interval(0.95)
    assert math.isclose(lo, ci.low, rel_tol=1e-9) and math.isclose(hi, ci.high, rel_tol=1e-9)
    assert math.isclose(2 * min(w.p_lower(), w.p_higher()), ref.pvalue, rel_tol=1e-9)


def test_paired_runs_are_scipys_paired_t() -> None:
    rng = np.random.default_rng(6)
    run = rng.normal(0, 0.08, 6)  # conditions both stacks of a run share
    a, b = run + rng.normal(0, 0.01, 6), run - 0.05 + rng.normal(0, 0.01, 6)
    w = welch(a, b, paired=True)
    ref = stats.ttest_rel(b, a)
    assert math.isclose(w.diff / w.se, ref.statistic, rel_tol=1e-9) and w.df == 5
    assert math.isclose(2 * min(w.p_lower(), w.p_higher()), ref.pvalue, rel_tol=1e-9)
    assert w.se < welch(a, b).se / 3  # the shared conditions cancel


def test_floors_and_one_run_sides() -> None:
    # identical runs cannot give a zero-width interval: the floor holds it open
    w = welch([0.0, 0.0, 0.0], [0.1, 0.1, 0.1], floor_a=0.01 ** 2, floor_b=0.01 ** 2)
    assert w.se == pytest.approx(math.sqrt(2 * 0.01 ** 2 / 3))
    # one run on a side borrows the other side's spread and degrees of freedom
    w = welch([0.0], [0.1, 0.2, 0.3])
    assert w.df == 2 and w.var_a == pytest.approx(0.01)
    # one run on each side: no interval
    w = welch([0.0], [0.1])
    assert w.se is None and w.interval(0.95) is None and w.p_equivalent(0.05) is None


def test_twenty_percent_slower_links_are_worse_on_the_bandwidth_family() -> None:
    comp = compare_sets(_lab(0, 20, 5))
    fam = {f.name: f for f in comp.families}
    assert fam["bandwidth"].outcome == "worse" and comp.outcome == "worse"
    bw = comp.figures[f"{CASE}/bw_1MiB"]
    assert bw.outcome == "worse" and bw.change.high < 0 and bw.change.level == 0.95
    # the family's interval is at its Holm level (2 families: 97.5 % for the first)
    assert fam["bandwidth"].change.level == pytest.approx(0.975)
    assert "[" in fam["bandwidth"].change.text()


def test_clean_against_clean_is_never_better_or_worse_here() -> None:
    comp = compare_sets(_lab(0, 0, 5))
    assert {f.outcome for f in comp.families} <= {"same", "inconclusive"}
    inc = [f for f in comp.families if f.outcome == "inconclusive"]
    assert inc and all("runs per side" in f.note or "too wide" in f.note for f in inc)


def test_same_when_every_interval_lies_inside_the_margin() -> None:
    rng = np.random.default_rng(2)
    runs = [[float(v) for v in 100 * math.exp(rng.normal(0, 0.01)) * np.exp(
        rng.normal(0, 0.005, 5))] for _ in range(12)]
    pairs = {"c@s:p+e/bw_1MiB": FigurePair(runs[:6], runs[6:], "higher", "MB/s", 1 << 20)}
    assert compare_sets(pairs).outcome == "same"
    # a margin narrower than the noise: not `same`
    assert compare_sets(pairs, margin=0.002).outcome == "inconclusive"


def test_one_run_per_side_has_no_interval_and_says_what_would() -> None:
    pairs = {k: p._replace(a_runs=p.a_runs[:1], b_runs=p.b_runs[:1], a_ids=p.a_ids[:1],
                           b_ids=p.b_ids[:1], spread=0.07)
             for k, p in _lab(0, 20, 1).items()}
    comp = compare_sets(pairs)
    assert not comp.has_interval
    bw = comp.figures[f"{CASE}/bw_1MiB"]
    assert not bw.change.has_interval and "[" not in bw.change.text()
    fam = next(f for f in comp.families if f.name == "bandwidth")
    assert fam.outcome == "inconclusive" and "no interval" in fam.note
    # the runs differ by more than the margin (a 20 % slower link): the runs per
    # side that tell whether that is real, not those that would answer `same`
    diff = float(np.log1p(fam.change.change))
    assert abs(diff) >= np.log1p(0.05)
    assert f"{runs_to_detect(0.07 ** 2, 0.07 ** 2, diff)} runs per side would tell whether " \
        f"this {100 * fam.change.change:+.1f} % is real" in fam.note
    # runs within the margin of each other: the runs that would answer `same`
    close = {k: p._replace(b_runs=p.a_runs) for k, p in pairs.items()}
    fam = next(f for f in compare_sets(close).families if f.name == "bandwidth")
    assert f"{runs_needed(0.07 ** 2, 0.07 ** 2, 0.05)} runs per side would answer" in fam.note


def test_range_mean_over_the_sizes_inside_it() -> None:
    comp = compare_sets(_lab(0, 20, 5), size_range=(512 << 10, 4 << 20))
    ranges = {r.family: r for r in comp.ranges}
    assert ranges["bandwidth"].sizes == (1 << 20, 4 << 20)
    assert "latency" not in ranges  # its sizes (8 B, 64 KiB) lie outside
    assert ranges["bandwidth"].change.change < 0 and ranges["bandwidth"].change.has_interval


def test_a_site_family_spans_what_it_names() -> None:
    settings = JudgingSettings(families=(("network", ("*/bw_*", "*/lat_64KiB")),))
    comp = compare_sets(_lab(0, 20, 5), settings)
    assert {f.name for f in comp.families} == {"network", "latency"}
    net = next(f for f in comp.families if f.name == "network")
    assert len(net.figures) == 4


def test_runs_needed_gives_a_same_answer_at_that_spread() -> None:
    n = runs_needed(0.07 ** 2, 0.07 ** 2, 0.05)
    assert n is not None and 20 < n < 100
    assert runs_needed(0.01 ** 2, 0.01 ** 2, 0.05) == 2
    assert runs_needed(2.0, 2.0, 0.05) is None


def test_names_sizes_and_times() -> None:
    assert size_of("bw_1MiB") == 1 << 20 and size_of("lat_8B") == 8
    assert size_of("lat_64KiB") == 64 << 10 and size_of("triad") is None
    assert split_case("imb_pingpong_check %cache=warm@lab:lab+impi")["environ"] == "impi"
    assert parse_time("2026-11-20", "--a-since") == parse_time("2026-11-20T00:00Z", "x")


# -- hpcval compare on a stored history --------------------------------------------

PINGPONG = [Case("imb_pingpong_check", {"cache": "warm"}, [
    Fig("bw_1MiB", "MB/s", "higher", 18700), Fig("bw_4MiB", "MB/s", "higher", 19000),
    Fig("lat_8B", "us", "lower", 1.3)], environ=env) for env in ("impi", "openmpi")]


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """Ten runs tagged alternately nic=old and nic=new (the new NIC 20 % slower on
    the bandwidths), each with Intel MPI and Open MPI; stored and judged."""
    tmp = tmp_path_factory.mktemp("sets")
    site = make_site(tmp)
    rng = np.random.default_rng(5)
    for i in range(10):
        new = i % 2 == 1
        changes = [Change("imb_pingpong_check", v, 0.8) for v in ("bw_1MiB", "bw_4MiB")
                   ] if new else []
        run_id, path = write_run(site, rng, PINGPONG, changes, start=1.79e9 + 3600 * i)
        judged = store_and_judge(site, run_id, load_run_report(path),
                                 tags={"nic": "new" if new else "old", "seq": str(i)})
        assert judged.store_error is None
    return site.root


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HPCVAL_ROOT=str(root),
               PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    return subprocess.run([sys.executable, "-m", "hpcval.cli", *args, "--site", "demo"],
                          capture_output=True, text=True, env=env, timeout=300)


def test_tags_are_stored_shown_and_kept_by_a_rebuild(stored: Path) -> None:
    proc = _cli(stored, "history")
    assert proc.returncode == 0, proc.stderr
    assert "tags" in proc.stdout.splitlines()[0]
    assert proc.stdout.count("nic=new") == 5 and "seq=9" in proc.stdout
    before = _cli(stored, "history", "--json").stdout
    assert _cli(stored, "store", "rebuild").returncode == 0
    after = json.loads(_cli(stored, "history", "--json").stdout)
    assert [r["tags"] for r in after] == [r["tags"] for r in json.loads(before)]


def test_tag_sides_conclusion_first_and_json(stored: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.html"
    proc = _cli(stored, "compare", "tag:nic=old", "tag:nic=new", "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("WORSE: B is worse than A"), lines[0]
    worse = [ln for ln in lines if ln.startswith("WORSE imb_pingpong_check")]
    assert len(worse) == 2  # the bandwidth family with Intel MPI and with Open MPI
    assert any(ln.startswith("  worse bw_1MiB") and "5 vs 5 runs" in ln for ln in lines)
    assert out.is_file() and "id='verdict'" in out.read_text()
    js = json.loads(_cli(stored, "compare", "tag:nic=old", "tag:nic=new", "--json").stdout)
    assert js["outcome"] == "worse"
    bw = [f for f in js["figures"] if f["name"].endswith("+impi/bw_1MiB")][0]
    assert bw["ci_low"] < -0.2 < bw["ci_high"] < 0 and bw["runs_a"] == 5  # the true -20 %


def test_environments_compared_on_the_same_runs(stored: Path) -> None:
    # the same runs, Intel MPI against Open MPI (both at the old NIC's level)
    js = json.loads(_cli(stored, "compare", "tag:nic=old", "tag:nic=old", "--a-environ",
                         "impi", "--b-environ", "openmpi", "--json").stdout)
    assert js["sides"][0]["runs"] == js["sides"][1]["runs"] and len(js["sides"][0]["runs"]) == 5
    assert js["outcome"] in ("same", "inconclusive")
    assert all("+impi vs openmpi/" in f["name"] for f in js["figures"])
    # the same cases on both sides from the same runs say nothing
    proc = _cli(stored, "compare", "tag:nic=old", "tag:nic=old")
    assert proc.returncode == 2 and "on both sides" in proc.stderr
    # an environment on one side only leaves the other side ambiguous
    proc = _cli(stored, "compare", "tag:nic=old", "tag:nic=new", "--a-environ", "impi")
    assert proc.returncode == 2 and "--b-environ" in proc.stderr


def test_one_run_per_side_says_it_has_no_interval(stored: Path) -> None:
    runs = [r["run_id"] for r in Store(stored / "var" / "demo" / "history.sqlite").runs()]
    proc = _cli(stored, "compare", runs[0], runs[1])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("NO INTERVAL: one run per side")
    # an old-NIC run against a new-NIC one, 20 % apart: not how many runs would
    # answer `same`, but how many tell whether that difference is real
    assert re.search(r"runs per side would tell whether this [-+]\d+\.\d % is real", proc.stdout)
    # and the latency family, which did not move: how many would answer `same`
    assert re.search(r"latency: .*runs per side would answer `same`", proc.stdout)
    reports = stored / "var" / "demo" / "reports"
    proc = _cli(stored, "compare", str(reports / f"run-report-{runs[0]}.json"),
                str(reports / f"run-report-{runs[1]}.json"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("NO INTERVAL: one run per side")


def test_baseline_side_leaves_out_the_runs_it_is_compared_with(stored: Path) -> None:
    runs = [r["run_id"] for r in Store(stored / "var" / "demo" / "history.sqlite").runs()]
    js = json.loads(_cli(stored, "compare", "baseline", runs[-1], "--json").stdout)
    assert runs[-1] not in js["sides"][0]["runs"] and len(js["sides"][0]["runs"]) == 5


@pytest.mark.parametrize("args,says", [
    (["nosuchrun", "tag:nic=new"], "no stored run 'nosuchrun'"),
    (["tag:nic", "tag:nic=new"], "KEY=VALUE"),
    (["tag:nic=old", "tag:nic=new", "--margin", "500%"], "--margin"),
    (["tag:nic=old", "tag:nic=new", "--a-since", "yesterday"], "--a-since 'yesterday'"),
    (["tag:nic=gone", "tag:nic=new"], "no stored run matches"),
])
def test_wrong_input_is_one_line_and_exit_2(stored: Path, args: list[str], says: str) -> None:
    proc = _cli(stored, "compare", *args)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_validate_takes_tags_and_refuses_a_malformed_one(stored: Path) -> None:
    proc = _cli(stored, "validate", "--tag", "nic")
    assert proc.returncode == 2 and "KEY=VALUE" in proc.stderr
    assert CASES  # the history maker's default cases are untouched by this module


def test_a_family_needs_the_runs_its_noisiest_figure_needs() -> None:
    comp = compare_sets(_lab(0, 0, 5))
    for fam in comp.families:
        each = [comp.figures[k].needed for k in fam.figures]
        assert fam.needed == (None if None in each else max(each))


def test_the_sites_spread_comes_from_the_runs_on_neither_side(stored: Path) -> None:
    store = Store(stored / "var" / "demo" / "history.sqlite")
    runs = store.runs()
    ids = [r["run_id"] for r in runs]
    a, b = Side.parse("A", f"{ids[0]},{ids[2]}"), Side.parse("B", f"{ids[4]},{ids[6]}")
    sides = resolve(store, a, b, JudgingSettings())
    others = [r for r in runs if r["accepted"] and r["run_id"] not in ids[0:7:2]]
    assert len(others) >= 3
    for fig in sides.figures.values():
        assert fig.spread is not None and fig.spread_df == len(others) - 1
    # the same runs as the whole history would have given more degrees of freedom
    everything = resolve(store, Side.parse("A", ids[0]), Side.parse("B", ids[2]),
                         JudgingSettings())
    assert all(f.spread_df == len(others) + 1 for f in everything.figures.values())
