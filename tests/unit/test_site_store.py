"""Site names, run ids, the per-site lock, atomic writes and the results store."""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import time
from pathlib import Path

import pytest

from hpcval.core.errors import EnvironmentFault, InputError, LockTimeout, StoreError
from hpcval.core.fileio import atomic_write, keep_backup
from hpcval.core.runid import new_run_id, valid
from hpcval.history.contract import band
from hpcval.history.rebuild import rebuild
from hpcval.history.store import Store, records_from_report, run_reports, verdicts_path
from hpcval.reporting.report import load_run_report
from hpcval.run.lock import site_lock
from hpcval.site import Site, safe_path, validate_name

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


@pytest.mark.parametrize("name", ["local", "lab", "gcp-c2.impi_2"])
def test_site_names_accepted(name):
    assert validate_name(name) == name


@pytest.mark.parametrize("name", ["", "../site-configs/local", "a/b", "$(touch X)", "a;b",
                                  "`id`", "a b", ".hidden", "-rf", "x" * 65])
def test_site_names_refused(name, tmp_path):
    with pytest.raises(InputError, match="not a site name"):
        Site.load(name, ROOT)
    assert not (tmp_path / "X").exists()


def test_site_files_and_unknown_site():
    site = Site.load("local", ROOT)
    assert site.config == ROOT / "site-configs/local/config.py"
    assert site.references.name == "references.yaml"
    assert site.spack_env == ROOT / "environments/local"
    assert site.checks_dir == ROOT / "reframe-checks"
    with pytest.raises(InputError, match="no such site.*known sites: .*local"):
        Site.load("nosuchsite", ROOT)


def test_the_checkout_directories_are_named_once():
    """``reframe-checks`` and ``site-configs`` are spelled in hpcval.core.paths only;
    everything else asks a Site (or hpcval.core.paths)."""
    spelled: dict[str, list[str]] = {}
    for file in sorted((ROOT / "src" / "hpcval").rglob("*.py")):
        for name in ('"reframe-checks"', '"site-configs"'):
            if name in file.read_text():
                spelled.setdefault(name, []).append(file.relative_to(ROOT).as_posix())
    assert spelled == {'"reframe-checks"': ["src/hpcval/core/paths.py"],
                       '"site-configs"': ["src/hpcval/core/paths.py"]}


@pytest.mark.parametrize("path", ["/tmp/$(touch X)", "/tmp/a;b", "/tmp/a b", "/tmp/`id`"])
def test_unsafe_paths_refused(path):
    with pytest.raises(InputError, match="not allowed"):
        safe_path(path, "HPCVAL_VAR")


def test_run_ids_unique_within_one_second():
    now = time.time()
    ids = {new_run_id(now) for _ in range(200)}
    assert len(ids) == 200 and all(valid(i) for i in ids)
    assert sorted([new_run_id(now - 10), new_run_id(now)])[0].startswith(
        time.strftime("%Y%m%dT%H%M%S", time.gmtime(now - 10)))


def _hold(path: str, seconds: float, ready) -> None:
    with site_lock(Path(path), "validate run test-holder", 5):
        ready.set()
        time.sleep(seconds)


def test_lock_waits_then_names_the_holder(tmp_path):
    lock = tmp_path / "validate.lock"
    ready = multiprocessing.Event()
    holder = multiprocessing.Process(target=_hold, args=(str(lock), 3.0, ready))
    holder.start()
    try:
        assert ready.wait(10)
        with pytest.raises(LockTimeout, match=rf"held by pid {holder.pid} .*test-holder"):
            with site_lock(lock, "second", 0.5):
                pass
        start = time.monotonic()
        with site_lock(lock, "third", 30):  # waits until the holder is done
            assert time.monotonic() - start > 0.5
    finally:
        holder.join(10)


def test_lock_released_when_holder_dies(tmp_path):
    lock = tmp_path / "validate.lock"
    ready = multiprocessing.Event()
    holder = multiprocessing.Process(target=_hold, args=(str(lock), 60.0, ready))
    holder.start()
    assert ready.wait(10)
    holder.kill()
    holder.join(10)
    with site_lock(lock, "after a crash", 5):
        pass


def test_atomic_write_and_unique_backups(tmp_path):
    target = tmp_path / "references.yaml"
    atomic_write(target, "a: 1\n")
    backups = {keep_backup(target) for _ in range(20)}
    assert len(backups) == 20 and all(b.read_text() == "a: 1\n" for b in backups)
    atomic_write(target, "a: 2\n")
    assert target.read_text() == "a: 2\n"
    assert not list(tmp_path.glob(".*.tmp"))


def test_atomic_write_gives_the_mode_a_new_file_gets(tmp_path):
    """Reports, pages and verdicts are read by others (a web server, a person
    on the login node): 0666 less the umask, as open() gives, never the 0600
    of the temporary file they are written through."""
    old = os.umask(0o022)
    try:
        page = atomic_write(tmp_path / "latest.html", "<html></html>")
        assert page.stat().st_mode & 0o777 == 0o644
        private = atomic_write(tmp_path / "p.prom", "x\n", mode=0o600)
        assert private.stat().st_mode & 0o777 == 0o600
        os.umask(0o077)
        assert atomic_write(tmp_path / "latest.html", "x").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


def test_atomic_write_read_only_names_the_path(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only directories")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    with pytest.raises(EnvironmentFault, match=rf"{ro}.*not writable"):
        atomic_write(ro / "x", "y")


def _stored_report(tmp_path: Path, name: str = "lab-1g-run-report.json") -> Path:
    text = (DATA / "compare" / name).read_text().replace("@DATA@", str(DATA / "compare"))
    path = tmp_path / "reports" / f"run-report-{new_run_id()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_store_keeps_runs_and_refuses_overwrite(tmp_path):
    store = Store(tmp_path / "history.sqlite")
    path = _stored_report(tmp_path)
    run_id = path.stem.removeprefix("run-report-")
    run = records_from_report(load_run_report(path), run_id, "lab")
    store.add_run(run)
    with pytest.raises(StoreError, match="stored already"):
        store.add_run(run)
    points = store.history(check="imb_pingpong_internode_check", variable="bw_1MiB")
    assert len(points) == 1 and points[0].better == "higher" and points[0].samples
    lat = store.history(check="imb_pingpong_internode_check", variable="lat_0B")
    assert lat[0].better == "lower"
    assert [r["run_id"] for r in store.runs()] == [run_id]


def test_corrupt_store_detected_and_rebuilt(tmp_path):
    store = Store(tmp_path / "history.sqlite")
    paths = [_stored_report(tmp_path), _stored_report(tmp_path, "lab-unshaped-run-report.json")]
    for p in paths:
        store.add_run(records_from_report(load_run_report(p),
                                          p.stem.removeprefix("run-report-"), "lab"))
        verdicts_path(p).parent.mkdir(exist_ok=True)  # judged by hpcval: rebuild imports it
        verdicts_path(p).write_text('{"result": "pass", "accepted": true, "verdicts": []}')
    data = bytearray(store.path.read_bytes())
    data[:100] = b"\0garbage" * 12 + b"\0" * 4
    store.path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"corrupt.*hpcval store rebuild --site"):
        store.runs()
    done = rebuild(store, run_reports(tmp_path / "reports"), "lab")
    assert done.stored == 2 and not done.skipped and done.kept is not None
    assert done.kept.name.endswith(".broken") and done.kept.exists() and not done.old_healthy
    assert len(store.runs()) == 2
    # a healthy store is rebuilt beside and kept aside as .old; a report hpcval
    # never judged (a plain ReFrame report, a dry run) is listed, not imported
    done.kept.unlink()
    plain = _stored_report(tmp_path)
    done = rebuild(store, run_reports(tmp_path / "reports"), "lab")
    assert done.stored == 2 and done.old_healthy and done.kept is not None
    assert done.kept.name.endswith(".old") and len(done.kept.read_bytes()) > 0
    skipped = done.skipped
    assert len(skipped) == 1 and str(plain) in skipped[0] and "never judged" in skipped[0]
    assert sorted(tmp_path.glob("history.sqlite*")) == sorted([store.path, done.kept])
    # a run the healthy store holds (stored before verdicts files were kept)
    # is kept, with its result, though it has no verdicts file
    legacy = _stored_report(tmp_path, "lab-unshaped-run-report.json")
    legacy_id = legacy.stem.removeprefix("run-report-")
    run = records_from_report(load_run_report(legacy), legacy_id, "lab")
    run.result, run.accepted = "regressed", False
    store.add_run(run)
    done = rebuild(store, run_reports(tmp_path / "reports"), "lab")
    assert done.stored == 3 and [s for s in done.skipped if str(legacy) in s] == []
    row = next(r for r in store.runs() if r["run_id"] == legacy_id)
    assert (row["result"], row["accepted"]) == ("regressed", 0)


def test_store_survives_a_writer_killed_mid_transaction(tmp_path):
    store = Store(tmp_path / "history.sqlite")
    path = _stored_report(tmp_path)
    store.add_run(records_from_report(load_run_report(path), "r1", "lab"))
    conn = sqlite3.connect(store.path)
    conn.execute("BEGIN")
    conn.execute("DELETE FROM figures")
    conn.close()  # never committed: as if the writer died
    assert len(store.history()) > 0


def test_band_is_one_sided_on_the_worse_side():
    assert band([[100, 110, 90], [105, 95]], "higher", "MB/s") == [100.0, -0.55, None, "MB/s"]
    assert band([[2.0, 2.5], [3.0]], "lower", "us") == [2.625, None, 1.286, "us"]
    assert band([[-1.0]], "lower", "us") is None
    assert band([], "higher", "MB/s") is None


def test_verdict_file_shape_is_json(tmp_path):
    # the verdicts kept beside a report are plain JSON a script can read
    path = tmp_path / "verdicts" / "x.json"
    atomic_write(path, json.dumps({"result": "pass", "accepted": True, "verdicts": []}))
    assert json.loads(path.read_text())["accepted"] is True


def test_a_run_report_is_found_by_path_file_name_or_run_id(tmp_path, monkeypatch):
    """`hpcval report` and `references capture --tolerance` take a run report as
    `compare` does: a path, a file name in var/<site>/reports/, or a run id."""
    root = tmp_path / "checkout"
    (root / "site-configs" / "s").mkdir(parents=True)
    site = Site("s", root)
    run_id = new_run_id()
    report = site.report_path(run_id)
    report.parent.mkdir(parents=True)
    report.write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert site.find_report(report) == report
    assert site.find_report(report.name) == report
    assert site.find_report(report.stem) == report
    assert site.find_report(run_id) == report
    assert site.find_report("nosuch.json") == Path("nosuch.json")  # its reader names it
    assert site.find_report("sub/nosuch.json") == Path("sub/nosuch.json")
