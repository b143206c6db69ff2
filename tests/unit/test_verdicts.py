"""A stored run against its history: the glue between the results store and
the statistics, on seeded synthetic runs written as real run reports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from hpcval.core.runid import new_run_id
from hpcval.history.rebuild import rebuild
from hpcval.history.store import Store, run_reports, verdicts_path
from hpcval.reporting.report import load_run_report
from hpcval.run.verdicts import store_and_judge, stored
from hpcval.site import Site


def _site(tmp_path: Path) -> Site:
    root = tmp_path / "checkout"
    (root / "site-configs" / "s").mkdir(parents=True)
    (root / "site-configs" / "s" / "config.py").write_text("")
    (root / "site-configs" / "s" / "judging.yaml").write_text("k: 5\nalpha: 0.05\n")
    return Site("s", root)


def _run(site: Site, rng: np.random.Generator, level: float, n: int = 8,
         noise: float = 0.03, run_noise: float = 0.03, result: str = "pass",
         phase: str | None = None) -> tuple[str, object]:
    """A run report with one case and two figures (bandwidth, latency) whose
    samples are drawn around ``level`` times their baseline."""
    shift = float(np.exp(rng.normal(0, run_noise)))
    bw = list(1000 * level * shift * np.exp(rng.normal(0, noise, n)))
    lat = list(2.0 / (level * shift) * np.exp(rng.normal(0, noise, n)))
    return _report(site, {"bw_1MiB": ("MB/s", "higher", bw), "lat_8B": ("us", "lower", lat)},
                   result, phase)


def _report(site: Site, figures: dict[str, tuple[str, str, list[float]]],
            result: str = "pass", phase: str | None = None) -> tuple[str, object]:
    """A stored run report of one case with these figures (unit, better, samples)."""
    run_id = new_run_id()
    out = site.var / "output" / run_id / "case"
    out.mkdir(parents=True)
    (out / "hpcval-samples.json").write_text(json.dumps({
        name: {"unit": unit, "better": better, "samples": samples}
        for name, (unit, better, samples) in figures.items()}))
    tc = {"display_name": "imb_pingpong_check %cache=warm", "system": "s",
          "partition": "default", "environ": "impi", "result": result, "fail_phase": phase,
          "outputdir": str(out), "stagedir": None, "unique_name": "x",
          "perfvalues": {f"s:default:{name}": [float(np.median(samples)), 0, None, None, unit,
                                               "pass"]
                         for name, (unit, _, samples) in figures.items()}}
    path = site.report_path(run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"session_info": {"hostname": "h"},
                                "runs": [{"testcases": [tc]}]}))
    return run_id, load_run_report(path)


def _outcomes(judged) -> dict[str, str]:
    return {v: o for _, v, o, _ in judged.verdicts}


def test_no_baseline_then_pass_then_regressed(tmp_path):
    site = _site(tmp_path)
    rng = np.random.default_rng(7)
    for _ in range(5):
        run_id, report = _run(site, rng, 1.0)
        judged = store_and_judge(site, run_id, report)
        assert set(_outcomes(judged).values()) == {"no-baseline"} and not judged.regressed
    run_id, report = _run(site, rng, 1.0)
    assert set(_outcomes(store_and_judge(site, run_id, report)).values()) <= {"pass", "warn"}
    run_id, report = _run(site, rng, 0.7)  # 30 % less bandwidth, 43 % more latency
    judged = store_and_judge(site, run_id, report)
    assert _outcomes(judged) == {"bw_1MiB": "regressed", "lat_8B": "regressed"}
    assert judged.regressed and "REGRESSED" in judged.text and "p=" in judged.text
    runs = Store(site.history_db).runs()
    assert runs[-1]["result"] == "regressed" and not runs[-1]["accepted"]
    # the verdicts are kept beside the reports and shown again by `hpcval report`
    again = stored(site, run_id, report)
    assert again.regressed and _outcomes(again) == _outcomes(judged)


def test_regressed_run_stays_out_of_the_baseline(tmp_path):
    site = _site(tmp_path)
    rng = np.random.default_rng(11)
    for _ in range(5):
        store_and_judge(site, *_run(site, rng, 1.0))
    store_and_judge(site, *_run(site, rng, 0.5))
    judged = store_and_judge(site, *_run(site, rng, 1.0))
    assert "regressed" not in _outcomes(judged).values()


def test_sustained_small_drop_flagged_by_change_points(tmp_path):
    """A 10 % drop with 7.6 % run-to-run noise is inside one run's prediction
    interval; several runs at the new level are flagged (the family's CUSUM),
    in most of 8 seeded histories."""
    flagged = 0
    for seed in range(8):
        site = _site(tmp_path / str(seed))
        rng = np.random.default_rng(seed)
        for _ in range(10):
            store_and_judge(site, *_run(site, rng, 1.0, run_noise=0.076))
        for _ in range(8):
            judged = store_and_judge(site, *_run(site, rng, 0.9, run_noise=0.076))
            if judged.regressed:
                flagged += 1
                break
    assert flagged >= 5  # most; 5 of 8 measured with h = 5 (docs/judging.md)


def test_store_error_keeps_the_run_report(tmp_path):
    site = _site(tmp_path)
    rng = np.random.default_rng(1)
    run_id, report = _run(site, rng, 1.0)
    site.history_db.write_bytes(b"not a database at all" * 100)
    judged = store_and_judge(site, run_id, report)
    assert judged.store_error is not None and "corrupt" in str(judged.store_error)
    assert site.report_path(run_id).is_file()


@pytest.mark.parametrize("record", [True])
def test_record_judges_nothing(tmp_path, record):
    site = _site(tmp_path)
    rng = np.random.default_rng(5)
    judged = store_and_judge(site, *_run(site, rng, 1.0), record=record)
    assert judged.verdicts == [] and "Recorded" in judged.text
    assert len(Store(site.history_db).runs()) == 1


def test_band_failures_are_still_measurements(tmp_path):
    """A case that fails only its reference band (a site whose floors are not met)
    still has a history: its figures are judged and build baselines; a case that
    failed before its figures (sanity) is judged by its failure alone."""
    site = _site(tmp_path)
    rng = np.random.default_rng(13)
    for _ in range(5):
        store_and_judge(site, *_run(site, rng, 1.0, result="fail", phase="performance"))
    judged = store_and_judge(site, *_run(site, rng, 0.6, result="fail", phase="performance"))
    assert _outcomes(judged) == {"bw_1MiB": "regressed", "lat_8B": "regressed"}
    broken = store_and_judge(site, *_run(site, rng, 1.0, result="fail", phase="sanity"))
    assert broken.verdicts == []


def test_accepting_a_planned_change_starts_a_new_level(tmp_path):
    """A step a person accepts (`hpcval history --accept` on the regressed run:
    a planned change) is not flagged again by the sustained rule at every
    later run; a new drop after it still is."""
    site = _site(tmp_path)
    rng = np.random.default_rng(18)
    for _ in range(8):
        store_and_judge(site, *_run(site, rng, 1.0))
    run_id, report = _run(site, rng, 0.5)
    assert store_and_judge(site, run_id, report).regressed
    Store(site.history_db).set_accepted(run_id, True)
    for _ in range(8):  # the new level: regressed against the old runs until K accrue
        rid, rep = _run(site, rng, 0.5)
        judged = store_and_judge(site, rid, rep)
        notes = [d.get("note") or "" for _, _, _, d in judged.verdicts]
        assert not any(n.startswith("sustained") for n in notes), notes
        if judged.regressed:
            Store(site.history_db).set_accepted(rid, True)
    for _ in range(3):
        judged = store_and_judge(site, *_run(site, rng, 0.5))
        assert not judged.regressed, judged.text
    judged = store_and_judge(site, *_run(site, rng, 0.25))
    assert judged.regressed


def test_runs_a_person_rejected_stay_out_of_the_sustained_rule(tmp_path):
    """Two runs 30 % slower, each called `regressed` and left out with
    `hpcval history --reject`: the next run at the old level is not called
    `regressed` by the sustained rule from the runs a person rejected."""
    from hpcval.commands.history import _mark

    site = _site(tmp_path)
    rng = np.random.default_rng(11)
    store = Store(site.history_db)
    for _ in range(6):
        store_and_judge(site, *_run(site, rng, 1.0, run_noise=0.01, noise=0.02))
    for _ in range(2):
        rid, rep = _run(site, rng, 0.7, run_noise=0.01, noise=0.02)
        assert store_and_judge(site, rid, rep).regressed
        _mark(site, store, rid, False)
    judged = store_and_judge(site, *_run(site, rng, 1.0, run_noise=0.01, noise=0.02))
    assert not judged.regressed, judged.text
    assert "sustained" not in judged.text


def test_a_glob_that_matches_no_figure_is_noted_with_a_real_name(tmp_path):
    site = _site(tmp_path)
    site.judging.write_text("figures:\n  'imb_pingpong_check/lat_8B': {threshold: 50%}\n"
                            "  '*/bw_1MiB': {k: 5}\n"
                            "families:\n  network: ['imb_pingpong_*/bw_*', 'osu_*/bw_*']\n")
    judged = store_and_judge(site, *_run(site, np.random.default_rng(2), 1.0))
    assert ("figures: 'imb_pingpong_check/lat_8B' matches no figure of this run (figures are "
            "named like 'imb_pingpong_check %cache=warm@s:default+impi/") in judged.text
    assert "'*/bw_1MiB' matches" not in judged.text
    # a family's glob is named under its own key, not as one of figures:
    assert "families: network: 'osu_*/bw_*' matches no figure of this run" in judged.text
    assert "figures: 'osu_*/bw_*'" not in judged.text
    assert "'imb_pingpong_*/bw_*' matches" not in judged.text


def test_references_from_history_keep_the_cases_the_runs_did_not_measure(tmp_path):
    """`references capture --from-history` after runs of the warm case only:
    the warm bands are new, the cold case keeps its references (the check's
    own $index tells the measured cases apart)."""
    from hpcval.history.contract import references_from_history

    site = _site(tmp_path)
    site.references.write_text(
        "imb_pingpong_check:\n  $index: [cache]\n"
        "  warm:\n    bw_1MiB: [1.0, -0.5, null, MB/s]\n"
        "  cold:\n    bw_1MiB: [777.0, -0.5, null, MB/s]\n    lat_8B: [9.0, null, 0.5, us]\n")
    rng = np.random.default_rng(4)
    for _ in range(3):
        store_and_judge(site, *_run(site, rng, 1.0))
    data = references_from_history(site)["imb_pingpong_check"]
    assert data["$index"] == ["cache"]
    assert data["cold"] == {"bw_1MiB": [777.0, -0.5, None, "MB/s"],
                            "lat_8B": [9.0, None, 0.5, "us"]}
    assert 900 < data["warm"]["bw_1MiB"][0] < 1100 and "lat_8B" in data["warm"]


def test_references_from_history_name_an_unknown_run(tmp_path):
    from hpcval.core.errors import InputError
    from hpcval.history.contract import references_from_history

    site = _site(tmp_path)
    run_id, report = _run(site, np.random.default_rng(8), 1.0)
    store_and_judge(site, run_id, report)
    with pytest.raises(InputError, match="no run 'nosuch'; `hpcval history --site s` lists"):
        references_from_history(site, runs=[run_id, "nosuch"])


def test_record_writes_a_valid_contract_when_a_case_measures_only_zeros(tmp_path):
    """`validate --record` of a site running cfdio_output_cost_check: its
    `strategy=none` case measures noise around zero (a cost below zero, no bytes
    written), which allows no band. The references are still written (that case
    left out, named) instead of an invalid file refused after the whole run."""
    import io

    from hpcval.run.verdicts import write_recorded_contract
    from hpcval.site import references as refs

    site = _site(tmp_path)
    run_id, _ = _run(site, np.random.default_rng(5), 1.0)
    out = site.var / "output" / run_id / "none"
    out.mkdir(parents=True)
    (out / "hpcval-samples.json").write_text(json.dumps({
        "output_cost": {"unit": "s", "better": "lower", "samples": [-3e-4, -1e-4, 2e-4]},
        "write_bw": {"unit": "MB/s", "better": "higher", "samples": [0.0, 0.0, 0.0]}}))
    path = site.report_path(run_id)
    doc = json.loads(path.read_text())
    doc["runs"][0]["testcases"].append({
        "display_name": "cfdio_output_cost_check %strategy=none %ranks=1", "system": "s",
        "partition": "default", "environ": "impi", "result": "pass", "fail_phase": None,
        "outputdir": str(out), "stagedir": None, "unique_name": "y",
        "perfvalues": {"s:default:output_cost": [-1e-4, 0, None, None, "s", "pass"],
                       "s:default:write_bw": [0.0, 0, None, None, "MB/s", "pass"]}})
    path.write_text(json.dumps(doc))
    report = load_run_report(path)
    store_and_judge(site, run_id, report, record=True)
    said = io.StringIO()
    write_recorded_contract(site, run_id, report, said)
    written = refs.load_references(site.references).entries
    assert set(written) == {"imb_pingpong_check"}
    assert ("no band for 2 figure(s) with samples at or below zero: "
            "cfdio_output_cost_check/impi/1/none/output_cost, "
            "cfdio_output_cost_check/impi/1/none/write_bw; write their references by hand"
            in said.getvalue())


def test_record_of_a_run_whose_every_case_failed_writes_nothing_and_is_no_input_error(
        tmp_path):
    """`validate --record` where every case that ran failed (a GPU site recorded
    on a node without a GPU): nothing to take references from; said in one line,
    the files untouched, and no InputError (exit 2): the failures give exit 1.
    A run with no failure and nothing passed (all skipped) stays wrong input."""
    import io

    from hpcval.core.errors import InputError
    from hpcval.run.verdicts import write_recorded_contract

    site = _site(tmp_path)
    site.references.write_text("# kept\n")
    run_id, report = _run(site, np.random.default_rng(6), 1.0, result="fail", phase="sanity")
    store_and_judge(site, run_id, report, record=True)
    said = io.StringIO()
    write_recorded_contract(site, run_id, report, said)
    assert said.getvalue().startswith("No references written: ")
    assert "no passed test case in the runs" in said.getvalue()
    assert site.references.read_text() == "# kept\n"
    assert not site.host_expectations.exists()
    run_id, report = _run(site, np.random.default_rng(7), 1.0, result="skip")
    store_and_judge(site, run_id, report, record=True)
    with pytest.raises(InputError, match="no passed test case"):
        write_recorded_contract(site, run_id, report, io.StringIO())


def test_a_run_that_moved_2x_is_held_until_the_old_level_comes_back(tmp_path):
    """hold_factor (2x by default): a run whose figure moved that far, even for
    the better, is not accepted automatically; a run at the old level leaves it
    out for good."""
    site = _site(tmp_path)
    rng = np.random.default_rng(11)
    for _ in range(7):
        store_and_judge(site, *_run(site, rng, 1.0))
    held_id, report = _run(site, rng, 2.5)  # 2.5x the bandwidth, 1/2.5 the latency
    judged = store_and_judge(site, held_id, report)
    assert not judged.regressed
    assert f"HELD run {held_id}: not accepted into baselines (" in judged.text
    assert re.search(r"bw_1MiB moved 2\.\d+x \(hold_factor 2\)", judged.text)
    assert f"--accept {held_id}" in judged.text
    store = Store(site.history_db)
    assert not store.runs()[-1]["accepted"]
    assert store.holds()[held_id]["state"] == "held"
    # the hold survives a rebuild of the store from the reports
    saved = json.loads(verdicts_path(site.report_path(held_id)).read_text())
    assert saved["held"]["state"] == "held" and not saved["accepted"]
    rebuild(Store(site.history_db), run_reports(site.report_path(held_id).parent), site.name)
    rebuilt = Store(site.history_db)
    assert rebuilt.holds()[held_id]["state"] == "held"
    assert not next(r for r in rebuilt.runs() if r["run_id"] == held_id)["accepted"]
    run_id, report = _run(site, rng, 1.0)
    judged = store_and_judge(site, run_id, report)
    assert f"run {held_id}: stays out of baselines" in judged.text
    hold = Store(site.history_db).holds()[held_id]
    assert hold["state"] == "outlier" and hold["confirmed_by"] == run_id


def test_a_held_run_a_person_accepts_starts_a_new_level(tmp_path, monkeypatch, capsys):
    from hpcval.cli import main

    site = _site(tmp_path)
    rng = np.random.default_rng(12)
    for _ in range(7):
        store_and_judge(site, *_run(site, rng, 1.0))
    held_id, report = _run(site, rng, 2.5)
    store_and_judge(site, held_id, report)
    (site.root / "reframe-checks").mkdir()
    monkeypatch.setenv("HPCVAL_ROOT", str(site.root))
    assert main(["history", "--site", "s"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(held_id))
    assert "held: bw_1MiB moved" in line
    assert main(["history", "--site", "s", "--accept", held_id]) == 0
    assert "a new level starts here" in capsys.readouterr().out
    store = Store(site.history_db)
    assert store.holds()[held_id]["state"] == "accepted"
    assert next(r for r in store.runs() if r["run_id"] == held_id)["accepted"]
    # the next runs at the new level are judged against it, not held again
    for _ in range(2):
        run_id, report = _run(site, rng, 2.5)
        judged = store_and_judge(site, run_id, report)
        assert "HELD" not in judged.text


def test_a_sustained_cut_called_run_after_run_says_since_when(tmp_path):
    """Runs called regressed count in the sustained rule (CUSUM over every run
    since the last accepted level): each verdict says since which run."""
    site = _site(tmp_path)
    rng = np.random.default_rng(13)
    for _ in range(10):
        store_and_judge(site, *_run(site, rng, 1.0))
    cut = []
    for _ in range(4):
        run_id, report = _run(site, rng, 0.8)
        cut.append(run_id)
        judged = store_and_judge(site, run_id, report)
        assert _outcomes(judged)["bw_1MiB"] == "regressed"
    detail = next(d for _, v, _, d in judged.verdicts if v == "bw_1MiB")
    assert detail["sustained"]["since"] == cut[0]
    assert f"sustained since {cut[0]} (4 runs, CUSUM" in judged.text


def _moded_run(site: Site, rng: np.random.Generator, share: float) -> tuple[str, object]:
    """A run report with one two-moded latency: each sample fast (about 2 us) or,
    with probability ``share``, slow (about 30 us: a rank's wake-up)."""
    slow = rng.random(8) < share
    lat = list(np.where(slow, 30.0 * np.exp(rng.normal(0, 0.3, 8)),
                        2.0 * np.exp(rng.normal(0, 0.03, 8))))
    return _report(site, {"lat_0B": ("us", "lower", lat)})


def test_a_gone_fast_mode_is_sustained_from_the_fast_mode_not_the_medians(tmp_path):
    """The sustained rule reads the statistic the verdict judged: a two-moded
    latency whose fast mode is gone for several runs is sustained since the
    first of them (or a clean run before it, where the CUSUM left zero), though
    its run medians (jumping between the modes before) barely moved."""
    site = _site(tmp_path)
    rng = np.random.default_rng(32)
    ids = []
    for _ in range(12):
        run_id, report = _moded_run(site, rng, float(rng.uniform(0.3, 0.7)))
        ids.append(run_id)
        store_and_judge(site, run_id, report)
    for _ in range(4):
        run_id, report = _moded_run(site, rng, 1.0)
        ids.append(run_id)
        judged = store_and_judge(site, run_id, report)
    detail = next(d for _, v, _, d in judged.verdicts if v == "lat_0B")
    assert detail["statistic"] == "fast"
    assert _outcomes(judged)["lat_0B"] == "regressed"
    # since the first gone run (index 12) or, where the CUSUM left zero on clean
    # runs before the step, since one of those
    assert ids.index(detail["sustained"]["since"]) <= 12
    assert detail["sustained"]["runs_after"] >= 4
    # the fast mode's values: the level moved by the modes' ratio
    assert detail["sustained"]["after"] > 5 * detail["sustained"]["before"]


def test_a_run_back_at_the_old_level_is_not_called_for_the_cut_before_it(tmp_path):
    """After a sustained cut, the first run back at the old level: the CUSUM
    over the runs since still adds up, but this run is nearer the old level than
    the worse one and is not `regressed` (it was, at +0.04 %)."""
    site = _site(tmp_path)
    rng = np.random.default_rng(13)
    for _ in range(10):
        store_and_judge(site, *_run(site, rng, 1.0))
    for _ in range(4):
        judged = store_and_judge(site, *_run(site, rng, 0.8))
        assert _outcomes(judged)["bw_1MiB"] == "regressed"
    judged = store_and_judge(site, *_run(site, rng, 1.0))
    assert _outcomes(judged)["bw_1MiB"] == "pass", judged.text
    assert "REGRESSED" not in judged.text
