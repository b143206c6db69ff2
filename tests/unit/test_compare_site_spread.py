"""The site's run-to-run spread in a run-set comparison: pooled with each side's
own spread by degrees of freedom (hpcval.history.judging.figurestats.welch), and
what it buys on the recorded lab pool whose runs are two-moded (one slow node of
four): three runs per side drawn from one mode each."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from hpcval.history.judging.compare import FigurePair, compare_sets, welch
from hpcval.history.judging.model import pooled_spread

DATA = Path(__file__).resolve().parents[1] / "data" / "judging"
CASE = "imb_pingpong_internode_check@lab:lab+impi"


def test_each_side_is_pooled_with_the_site_by_degrees_of_freedom() -> None:
    rng = np.random.default_rng(8)
    a, b = rng.normal(0, 0.02, 3), rng.normal(-0.1, 0.01, 4)
    v_site, df_site = 0.05 ** 2, 12
    w = welch(a, b, prior=(v_site, df_site))
    va = (2 * np.var(a, ddof=1) + df_site * v_site) / (2 + df_site)
    vb = (3 * np.var(b, ddof=1) + df_site * v_site) / (3 + df_site)
    assert w.var_a == pytest.approx(va) and w.var_b == pytest.approx(vb)
    ua, ub = va / 3, vb / 4
    assert w.se == pytest.approx(math.sqrt(ua + ub))
    assert w.df == pytest.approx((ua + ub) ** 2 / (ua ** 2 / 14 + ub ** 2 / 15))
    # a side with one run takes the site's spread and degrees of freedom
    w1 = welch(a[:1], b, prior=(v_site, df_site))
    assert w1.var_a == pytest.approx(v_site) and w1.se is not None
    # one run on each side still has no interval; paired runs ignore the site's spread
    assert welch(a[:1], b[:1], prior=(v_site, df_site)).se is None
    assert welch(a, b[:3], paired=True, prior=(v_site, df_site)) == welch(a, b[:3], paired=True)


def test_a_side_that_spreads_more_than_the_site_keeps_its_own_spread() -> None:
    """A change that makes runs noisier (a slower link under competing traffic)
    is not hidden behind the site's quieter history: a side whose own variance
    is larger than the site's by a one-sided F test at level 0.1 is not pooled."""
    a = np.array([0.0, 0.01, -0.01, 0.005, -0.005])
    b = np.array([-0.4, 0.0, -0.3, 0.1, -0.2])  # sd ~0.2 against the site's 0.02
    v_site, df_site = 0.02 ** 2, 20
    w = welch(a, b, prior=(v_site, df_site))
    assert w.var_b == pytest.approx(float(np.var(b, ddof=1)))  # its own
    assert w.var_a == pytest.approx((4 * np.var(a, ddof=1) + df_site * v_site) / (4 + df_site))
    ua, ub = w.var_a / 5, w.var_b / 5
    assert w.df == pytest.approx((ua + ub) ** 2 / (ua ** 2 / 24 + ub ** 2 / 4))


def _pool() -> tuple[dict, list[dict], list[dict]]:
    data = json.loads((DATA / "lab-pool.json").read_text())
    runs = data["runs"]
    return data["figures"], [r for r in runs if r["drop_pct"] == 0], \
        [r for r in runs if r["drop_pct"] == 20]


def _log_median(run: dict, fig: str) -> float:
    return math.log(float(np.median(run["figures"][fig])))


def _pairs(meta: dict, a: list[dict], b: list[dict], site: list[dict] | None
           ) -> dict[str, FigurePair]:
    out = {}
    for f, m in meta.items():
        spread, df = None, 0
        if site:
            spread, df, _ = pooled_spread([_log_median(r, f) for r in site])
        out[f"{CASE}/{f}"] = FigurePair(
            [r["figures"][f] for r in a], [r["figures"][f] for r in b], m["better"], m["unit"],
            m["size"], [f"a{i}" for i in range(len(a))], [f"b{i}" for i in range(len(b))],
            spread, df)
    return out


def test_three_runs_from_one_mode_each_are_covered_with_the_sites_spread() -> None:
    meta, clean, slow = _pool()
    truth = math.exp(np.mean([_log_median(r, "bw_1MiB") for r in slow])
                     - np.mean([_log_median(r, "bw_1MiB") for r in clean]))
    # A: three clean runs on pairs with the slow node; B: three runs at 20 % without it
    a = [r for r in clean if "lab-n4" in r["nodes"]][:3]
    b = [r for r in slow if "lab-n4" not in r["nodes"]][:3]
    site = [r for r in clean if r not in a]  # the clean runs on neither side
    key = f"{CASE}/bw_1MiB"
    alone = compare_sets(_pairs(meta, a, b, None)).figures[key].change
    pooled = compare_sets(_pairs(meta, a, b, site)).figures[key].change
    assert alone.low is not None and pooled.low is not None
    assert alone.high is not None and pooled.high is not None
    # each side's own runs agree: alone, the interval is narrow and misses the truth
    assert not 1 + alone.low <= truth <= 1 + alone.high
    # the site's runs have both modes: pooled in, the interval covers it
    assert 1 + pooled.low <= truth <= 1 + pooled.high
    assert pooled.change < 0 and pooled.high < 0  # still clearly slower
