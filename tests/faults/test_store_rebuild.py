"""``hpcval store rebuild`` and ``hpcval compare`` as a careless administrator
uses them: damaged, missing or foreign run reports and verdicts files, a
reports directory gone, a rebuild killed or run twice at once, runs nobody
would compare. Every case: the documented exit code, one line naming the
file, no traceback, and no run the store held is lost (docs/errors.md).

The store is made by real validations of the fake IMB benchmark (real
ReFrame, real MPI launcher), four runs tagged ``side=a``/``side=b``; each
case works on a copy of it.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import (
    BIN,
    CHECKS,
    TRACEBACK,
    Result,
    assert_clean_failure,
    make_checkout,
    needs_impi,
    run,
    tree_digest,
)

pytestmark = pytest.mark.integration


def _validate(root: Path, tag: str) -> str:
    res = run(root, "validate", "--site", "local", "--tag", tag, "--", "-c", str(CHECKS),
              "-n", "fake_imb_check.*mode=ok$")
    assert res.returncode == 0, res.output
    return next(w.strip("()") for w in res.stdout.split() if "Z-" in w and w[:8].isdigit())


@pytest.fixture(scope="module")
def four_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    needs_impi()
    root = make_checkout(tmp_path_factory.mktemp("rebuild"))
    return root, [_validate(root, f"side={s}") for s in "aabb"]


@pytest.fixture
def site(four_runs: tuple[Path, list[str]], tmp_path: Path) -> Path:
    """A copy of the checkout with its store, its reports naming the copy's
    output directories."""
    src, _ = four_runs
    root = tmp_path / "hpcval"
    shutil.copytree(src, root, symlinks=True)
    for report in (root / "var" / "local" / "reports").glob("*.json"):
        report.write_text(report.read_text().replace(str(src), str(root)))
    return root


def _var(root: Path) -> Path:
    return root / "var" / "local"


def _runs(root: Path) -> dict[str, dict]:
    res = run(root, "history", "--site", "local", "--json", "--last", "100000")
    assert res.returncode == 0, res.output
    return {r["run_id"]: r for r in json.loads(res.stdout)}


def _rebuild(root: Path, *extra: str) -> Result:
    res = run(root, "store", "rebuild", "--site", "local", *extra)
    assert TRACEBACK not in res.output, res.output
    return res


def _kept(root: Path) -> dict[str, str]:
    """The record: run reports and verdicts files, as digests."""
    return {**{f"reports/{k}": v for k, v in tree_digest(_var(root) / "reports").items()},
            **{f"verdicts/{k}": v for k, v in tree_digest(_var(root) / "verdicts").items()}}


def _same_runs(before: dict[str, dict], after: dict[str, dict]) -> None:
    """Every run as it was: result, acceptance, tags, hold."""
    assert set(after) == set(before)
    for run_id, old in before.items():
        new = after[run_id]
        for key in ("result", "accepted", "tags", "held", "started"):
            assert new[key] == old[key], (run_id, key, old[key], new[key])


def test_damaged_report_kept_from_the_old_store(site: Path,
                                                four_runs: tuple[Path, list[str]]) -> None:
    """`head -c 2000` of a stored run's report: the run is carried over from
    the old store (with its tags), the file named, exit 3; the old store is
    kept aside as .old."""
    ids = four_runs[1]
    before = _runs(site)
    report = _var(site) / "reports" / f"run-report-{ids[1]}.json"
    report.write_bytes(report.read_bytes()[:2000])
    res = _rebuild(site)
    assert_clean_failure(res, 3, "rebuilt", str(report), "every run of the old store kept")
    assert f"could not read: {report}: not a readable ReFrame run report" in res.stdout
    assert f"run {ids[1]} carried over from the old store" in res.stdout
    (kept,) = _var(site).glob("history.sqlite.*.old")
    assert f"previous store (healthy) kept as {kept}" in res.stdout
    _same_runs(before, _runs(site))
    assert before[ids[1]]["tags"] == {"side": "a"}
    # a second rebuild still has it (from the store the first one made)
    again = _rebuild(site)
    assert again.returncode == 3 and f"run {ids[1]} carried over" in again.stdout
    _same_runs(before, _runs(site))


def test_damaged_verdicts_file_keeps_tags_hold_and_rejection(
        site: Path, four_runs: tuple[Path, list[str]]) -> None:
    """A verdicts file cut short (or of the wrong shape) must not drop the
    run's tags, its rejection by a person or its hold: taken from the old
    store, the file named, exit 3."""
    ids = four_runs[1]
    assert run(site, "history", "--site", "local", "--reject", ids[2]).returncode == 0
    before = _runs(site)
    assert before[ids[2]]["held"]["state"] == "rejected" and before[ids[2]]["accepted"] == 0
    cut = _var(site) / "verdicts" / f"{ids[2]}.json"
    cut.write_bytes(cut.read_bytes()[:40])
    shaped = _var(site) / "verdicts" / f"{ids[3]}.json"
    shaped.write_text(json.dumps({"result": "pass", "verdicts": "all fine"}))
    res = _rebuild(site)
    assert_clean_failure(res, 3, "rebuilt", str(cut))
    for path in (cut, shaped):
        assert f"could not read: {path}" in res.stdout, res.stdout
    assert "result, acceptance, tags and hold taken from the old store" in res.stdout
    _same_runs(before, _runs(site))


def test_damaged_verdicts_without_an_old_store_is_not_accepted(site: Path) -> None:
    """No old store to take them from (deleted): the run is imported from its
    report but not accepted into baselines, and that is said."""
    var = _var(site)
    for path in var.glob("history.sqlite*"):
        path.unlink()
    victim = sorted((var / "verdicts").glob("*.json"))[0]
    victim.write_text("{")
    res = _rebuild(site)
    assert_clean_failure(res, 3, str(victim))
    assert "NOT accepted into baselines" in res.stdout
    runs = _runs(site)
    assert len(runs) == 4 and runs[victim.stem]["accepted"] == 0


def test_deleted_report_carried_over(site: Path, four_runs: tuple[Path, list[str]]) -> None:
    """`rm` of one run report: the run stays, said as carried over (exit 0:
    nothing could not be read)."""
    ids = four_runs[1]
    before = _runs(site)
    (_var(site) / "reports" / f"run-report-{ids[0]}.json").unlink()
    res = _rebuild(site)
    assert res.returncode == 0, res.output
    assert f"carried over: run {ids[0]}: no run report run-report-{ids[0]}.json" in res.stdout
    assert "4 run(s), 3 from their run reports, 1 carried over" in res.stdout
    _same_runs(before, _runs(site))


@pytest.mark.parametrize("fault", ["missing", "a-file"])
def test_reports_directory_gone(site: Path, fault: str) -> None:
    """The reports directory moved away, or a file in its place: nothing to
    rebuild from, exit 3 naming it, the store left exactly as it was."""
    var = _var(site)
    shutil.move(var / "reports", site / "reports.moved")
    if fault == "a-file":
        (var / "reports").write_text("not a directory\n")
    before = tree_digest(var)
    res = _rebuild(site)
    assert_clean_failure(res, 3, str(var / "reports"), "left as it is")
    assert tree_digest(var) == before


def test_killed_rebuild_leftovers_removed_by_the_next_command(site: Path) -> None:
    """A rebuild SIGKILLed mid-way leaves history.sqlite.<id>.rebuilding
    (-wal, -shm): the next command removes them and says so; a validation
    holding the site lock has them named instead; a rebuild at work keeps
    its own."""
    from hpcval.run.lock import site_lock

    var = _var(site)
    env = {**os.environ, "HPCVAL_ROOT": str(site)}
    env.pop("HPCVAL_VAR", None)
    # a real rebuild, killed while it writes: a slow disk is simulated by many runs' reports
    reports = var / "reports"
    base = sorted(reports.glob("*.json"))[0]
    verdicts = var / "verdicts" / (base.stem.removeprefix("run-report-") + ".json")
    for i in range(400):
        rid = f"20200101T{i // 60:02d}{i % 60:02d}00Z-{i:06x}"
        shutil.copy(base, reports / f"run-report-{rid}.json")
        shutil.copy(verdicts, var / "verdicts" / f"{rid}.json")
    proc = subprocess.Popen([str(BIN / "hpcval"), "store", "rebuild", "--site", "local"],
                            cwd=site, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(var.glob("history.sqlite.*.rebuilding")):
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    left = sorted(var.glob("history.sqlite.*.rebuilding*"))
    if not left:
        pytest.skip("the rebuild ended before it could be killed")
    with site_lock(var / "validate.lock", "store rebuild", 5):  # a rebuild at work
        res = run(site, "history", "--site", "local")
        assert res.returncode == 0 and "rebuilding" not in res.stderr, res.output
    with site_lock(var / "validate.lock", "validate run HOLDER-TEST", 5):
        res = run(site, "history", "--site", "local")
        assert res.returncode == 0 and "killed before it ended" in res.stderr, res.output
        assert "HOLDER-TEST" in res.stderr and left[0].exists()
    res = run(site, "history", "--site", "local")
    assert res.returncode == 0 and TRACEBACK not in res.output
    assert f"removed {len(left)} file(s)" in res.stderr and left[0].name in res.stderr
    assert not list(var.glob("history.sqlite.*.rebuilding*"))
    assert len(_runs(site)) == 4  # the store the killed rebuild would have replaced


def test_rebuild_while_another_rebuild_holds_the_lock(site: Path) -> None:
    from hpcval.run.lock import site_lock

    before = tree_digest(_var(site))
    with site_lock(_var(site) / "validate.lock", "store rebuild", 5):
        res = _rebuild(site, "--lock-timeout", "0.5")
    assert_clean_failure(res, 3, "validate.lock", "store rebuild", "--lock-timeout")
    assert tree_digest(_var(site)) == before


def test_report_of_another_format_version(site: Path,
                                          four_runs: tuple[Path, list[str]]) -> None:
    """A report whose `data_version` hpcval does not read (an edited or a
    far newer ReFrame's): not imported, named, the run carried over."""
    ids = four_runs[1]
    before = _runs(site)
    path = _var(site) / "reports" / f"run-report-{ids[3]}.json"
    data = json.loads(path.read_text())
    data["session_info"]["data_version"] = "9.0"
    path.write_text(json.dumps(data))
    res = _rebuild(site)
    assert_clean_failure(res, 3, str(path))
    assert "run report format 9.0" in res.stdout
    _same_runs(before, _runs(site))


def test_report_the_database_refuses(site: Path, four_runs: tuple[Path, list[str]]) -> None:
    """A report holding one case twice under two names (an edit, a merge of
    two reports): the store refuses it; no traceback, the run carried over."""
    ids = four_runs[1]
    before = _runs(site)
    path = _var(site) / "reports" / f"run-report-{ids[0]}.json"
    data = json.loads(path.read_text())
    tc = dict(data["runs"][0]["testcases"][0])
    tc["unique_name"] = tc["unique_name"] + "_copy"
    data["runs"][0]["testcases"].append(tc)
    path.write_text(json.dumps(data))
    res = _rebuild(site)
    assert_clean_failure(res, 3, str(path))
    assert "the store refuses its cases" in res.stdout
    _same_runs(before, _runs(site))


def test_foreign_and_copied_reports_listed_not_imported(site: Path) -> None:
    """Another site's report and a copy of a report under a new run id dropped
    into the reports directory (no verdicts of this site): listed as never
    judged, not imported; exit 0, every run kept."""
    before = _runs(site)
    reports = _var(site) / "reports"
    lab = Path(__file__).resolve().parents[1] / "data" / "compare" / "lab-1g-run-report.json"
    foreign = reports / "run-report-20260101T000000Z-1ab000.json"
    shutil.copy(lab, foreign)
    copied = reports / "run-report-20260101T000000Z-copy00.json"
    shutil.copy(sorted(reports.glob("run-report-2026112*.json"))[0], copied)
    res = _rebuild(site)
    assert res.returncode == 0, res.output
    for path in (foreign, copied):
        assert f"skipped: {path}: never judged by hpcval" in res.stdout
    _same_runs(before, _runs(site))


def test_old_copies_are_bounded_and_named(site: Path) -> None:
    """Each rebuild keeps the store it replaces; past three healthy copies
    the oldest is removed and named; corrupt copies are never removed."""
    var = _var(site)
    broken = var / "history.sqlite.20200101T000000Z-000000.broken"
    broken.write_bytes(b"kept by an earlier rebuild")
    broken2 = var / "history.sqlite.20200101T000001Z-000000.broken"
    broken2.write_bytes(b"kept by an earlier rebuild")
    outputs = [_rebuild(site) for _ in range(4)]
    assert all(r.returncode == 0 for r in outputs), outputs[-1].output
    olds = sorted(var.glob("history.sqlite.*.old"))
    assert len(olds) == 3
    assert "an older copy of a healthy store (the newest 3 are kept)" in outputs[-1].stdout
    assert "2 corrupt stores kept aside" in outputs[-1].stdout
    assert broken.exists() and broken2.exists()
    for old in olds:  # each copy is a whole store on its own
        with sqlite3.connect(old) as conn:
            assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 4


def test_nan_samples_left_out_and_counted(site: Path, four_runs: tuple[Path, list[str]]) -> None:
    """NaN and inf in a run's samples file: not stored, not counted (n), and
    the rebuild says how many it left out, in one line."""
    ids = four_runs[1]
    report = json.loads((_var(site) / "reports" / f"run-report-{ids[0]}.json").read_text())
    out = Path(report["runs"][0]["testcases"][0]["outputdir"])
    samples = json.loads((out / "hpcval-samples.json").read_text())
    good = list(samples["lat_8B"]["samples"])
    samples["lat_8B"]["samples"] = [*good, float("nan"), float("inf"), float("-inf")]
    (out / "hpcval-samples.json").write_text(json.dumps(samples))
    res = _rebuild(site)
    assert res.returncode == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("left out:")]
    assert len(lines) == 1 and "3 NaN/inf sample(s) of 1 figure(s) in 1 run(s)" in lines[0]
    hist = run(site, "history", "--site", "local", "--figure", "lat_8B", "--json")
    points = {p["run_id"]: p for p in json.loads(hist.stdout)}
    assert points[ids[0]]["samples"] == good


# -- compare: runs nobody would compare ------------------------------------------


def _orphan(site: Path, like: str) -> str:
    """A run whose hpcval died after ReFrame wrote its report: settled by the
    next command under the site lock (stored as orphaned, never judged)."""
    var = _var(site)
    orphan = "20261128T235959Z-0dead0"
    shutil.copy(var / "reports" / f"run-report-{like}.json",
                var / "reports" / f"run-report-{orphan}.json")
    (var / "run.json").write_text(json.dumps({"run_id": orphan, "hpcval_pid": 999999999,
                                              "pgid": None, "host": os.uname().nodename}))
    res = _rebuild(site)
    assert res.returncode == 0, res.output
    assert _runs(site)[orphan]["result"] == "orphaned"
    return orphan


def test_compare_leaves_out_rejected_and_orphaned_runs(
        site: Path, four_runs: tuple[Path, list[str]]) -> None:
    ids = four_runs[1]
    orphan = _orphan(site, ids[3])
    assert run(site, "history", "--site", "local", "--reject", ids[1]).returncode == 0
    res = run(site, "compare", "tag:side=a", f"{ids[2]},{ids[3]},{orphan}", "--site", "local")
    assert res.returncode == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("left out")]
    assert len(lines) == 1, res.stdout
    assert "left out 2 run(s) nobody would compare" in lines[0]
    assert f"1 orphaned (never judged) ({orphan})" in lines[0]
    assert f"1 rejected (hpcval history --reject) ({ids[1]})" in lines[0]
    side_a = next(ln for ln in res.stdout.splitlines() if ln.startswith("A:"))
    assert ids[1] not in side_a and ids[0] in side_a
    as_json = json.loads(run(site, "compare", "tag:side=a", f"{ids[2]},{ids[3]},{orphan}",
                             "--site", "local", "--json").stdout)
    assert {x["run"] for x in as_json["left_out"]} == {orphan, ids[1]}


@pytest.mark.parametrize("sides, named", [
    (("tag:side=nobody", "tag:side=b"), "side A (tag:side=nobody): no stored run matches"),
    (("tag:side=a", "20990101T000000Z-abcdef"), "no stored run '20990101T000000Z-abcdef'"),
    (("tag:side=b", "tag:side=b"), "is on both sides"),
    (("tag:side=a", "tag:side=b", "--site", "lab"), "no such site"),
    (("tag:side=a", "tag:side=b", "--site", "other"), "no results store yet"),
    (("tag:side=a", "tag:side=b", "--site", "../local"), "--site"),
], ids=["tag-matches-nothing", "run-id-unknown", "same-runs-both-sides", "unknown-site",
        "site-without-these-runs", "site-path"])
def test_compare_bad_sides(site: Path, sides: tuple[str, ...], named: str) -> None:
    """Sides that select nothing, or runs of another site: exit 2 (3 for a
    site with no store yet), one line, nothing changed."""
    shutil.copytree(site / "site-configs" / "local", site / "site-configs" / "other")
    before = _kept(site)
    args = sides if "--site" in sides else (*sides, "--site", "local")
    res = run(site, "compare", *args)
    assert res.returncode in (2, 3), res.output
    assert_clean_failure(res, res.returncode, named)
    assert _kept(site) == before


def test_compare_side_of_only_rejected_runs(site: Path,
                                            four_runs: tuple[Path, list[str]]) -> None:
    """Every run of a side rejected: exit 2, the side named and why its runs
    were left out."""
    ids = four_runs[1]
    for rid in ids[:2]:
        assert run(site, "history", "--site", "local", "--reject", rid).returncode == 0
    res = run(site, "compare", "tag:side=a", "tag:side=b", "--site", "local")
    assert_clean_failure(res, 2, "side A (tag:side=a): no stored run matches",
                         "left out 2 run(s) nobody would compare",
                         "2 rejected (hpcval history --reject)")


def test_rebuild_of_600_runs_keeps_all_and_names_the_3_damaged(
        site: Path, four_runs: tuple[Path, list[str]]) -> None:
    """The acceptance case: 600 runs stored as ``validate --record --tag``
    stores them (real run reports of the fake benchmark, each with its own
    output directory and samples, stored and marked by
    :func:`hpcval.run.verdicts.store_and_judge`), 3 reports cut to 2000 bytes:
    ``hpcval store rebuild`` keeps all 600 with their tags and names the 3."""
    from hpcval.reporting.report import load_run_report
    from hpcval.run.verdicts import store_and_judge
    from hpcval.site import Site

    var = _var(site)
    shutil.rmtree(var / "verdicts")
    for path in var.glob("history.sqlite*"):
        path.unlink()
    reports = var / "reports"
    template = sorted(reports.glob("run-report-*.json"))[0]
    text = template.read_text()
    for path in reports.glob("run-report-*.json"):
        path.unlink()
    data = json.loads(text)
    tc_out = Path(data["runs"][0]["testcases"][0]["outputdir"])
    old_prefix = str(tc_out).split("/output/")[0] + "/output/" + template.stem.removeprefix(
        "run-report-")
    local = Site("local", site)
    made = time.monotonic()
    ids = []
    for i in range(600):
        rid = f"2026{1 + i // 200:02d}01T{(i % 200) // 60:02d}{i % 60:02d}00Z-{i:06x}"
        shutil.copytree(old_prefix, var / "output" / rid)
        path = local.report_path(rid)
        one = json.loads(text.replace(old_prefix, str(var / "output" / rid)))
        one["session_info"]["time_start_unix"] = 1.79e9 + 3600 * i
        path.write_text(json.dumps(one))
        judged = store_and_judge(local, rid, load_run_report(path), record=True,
                                 tags={"batch": str(i % 3)})
        assert judged.store_error is None, judged.store_error
        ids.append(rid)
    made = time.monotonic() - made
    before = _runs(site)
    assert len(before) == 600
    damaged = [local.report_path(ids[k]) for k in (7, 300, 599)]
    for path in damaged:
        path.write_bytes(path.read_bytes()[:2000])
    took = time.monotonic()
    res = _rebuild(site)
    took = time.monotonic() - took
    assert_clean_failure(res, 3, "rebuilt", "3 file(s) could not be read",
                         "every run of the old store kept")
    for path in damaged:
        assert f"could not read: {path}: not a readable ReFrame run report" in res.stdout
    assert "600 run(s), 597 from their run reports, 3 carried over" in res.stdout
    after = _runs(site)
    _same_runs(before, after)
    assert after[ids[7]]["tags"] == {"batch": "1"}
    print(f"600 runs: stored in {made:.1f} s; rebuilt in {took:.1f} s "
          f"(load {os.getloadavg()[0]:.1f})")


def test_corrupt_store_and_a_damaged_report(site: Path,
                                            four_runs: tuple[Path, list[str]]) -> None:
    """The store lost a table (corrupt) and a report is cut short: the run is
    carried over from what SQLite can still read of the old store, said so;
    the corrupt store is kept aside as .broken."""
    ids = four_runs[1]
    before = _runs(site)
    db = _var(site) / "history.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE verdicts")
    report = _var(site) / "reports" / f"run-report-{ids[2]}.json"
    report.write_bytes(report.read_bytes()[:2000])
    res = _rebuild(site)
    assert_clean_failure(res, 3, str(report), "every run of the old store kept")
    assert (f"run {ids[2]} carried over from the corrupt old store (what SQLite could read)"
            in res.stdout), res.stdout
    (kept,) = _var(site).glob("history.sqlite.*.broken")
    assert f"previous store (corrupt) kept as {kept}" in res.stdout
    _same_runs(before, _runs(site))


def test_damaged_report_without_an_old_store(site: Path,
                                             four_runs: tuple[Path, list[str]]) -> None:
    """No old store to carry the run from (deleted): the rebuild stores the
    others, names the run it could not import, exits 3 and leaves its files."""
    ids = four_runs[1]
    var = _var(site)
    for path in var.glob("history.sqlite*"):
        path.unlink()
    report = var / "reports" / f"run-report-{ids[1]}.json"
    report.write_bytes(report.read_bytes()[:2000])
    record = _kept(site)
    res = _rebuild(site)
    assert_clean_failure(res, 3, str(report), "1 run(s) not imported",
                         "their files are left as they are")
    assert f"not imported: {report}: not a readable ReFrame run report" in res.stdout
    assert set(_runs(site)) == set(ids) - {ids[1]}
    assert _kept(site) == record
