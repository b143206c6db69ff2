"""Environment faults: a full or read-only results store, a corrupt or
locked store, two validations at once. Exit 3 (environment fault) naming the
path and what to do; nothing stored is lost. These exercise the run ids,
site lock and results store described in the design notes (runner.py,
lock.py, store.py), run here with the fake benchmarks."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import (
    BIN,
    CHECKS,
    OK_RUN,
    Result,
    assert_clean_failure,
    make_checkout,
    run,
    run_inprocess,
    tree_digest,
)

pytestmark = pytest.mark.integration

OK = OK_RUN


def _runs_in_history(root: Path, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str]) -> int:
    res = run_inprocess(root, "history", "--site", "local", "--json",
                        monkeypatch=monkeypatch, capsys=capsys)
    assert res.returncode == 0, res.output
    data = json.loads(res.stdout)
    return len(data if isinstance(data, list) else data.get("runs", []))


def test_full_var(tmp_path: Path, mount_tmpfs) -> None:
    root = make_checkout(tmp_path)
    tiny = mount_tmpfs("64k")
    (tiny / "filler").write_bytes(b"\0" * 60_000)
    res = run(root, *OK, env={"HPCVAL_VAR": str(tiny)})
    assert_clean_failure(res, 3, str(tiny), "disk full")


def test_read_only_var(tmp_path: Path, mount_tmpfs) -> None:
    root = make_checkout(tmp_path)
    ro = mount_tmpfs("1m", readonly=True)
    res = run(root, *OK, env={"HPCVAL_VAR": str(ro)})
    assert_clean_failure(res, 3, str(ro))
    assert "read-only" in res.error_line().lower() or "Read-only" in res.error_line()


def test_hpcval_var_with_shell_characters(tmp_path: Path) -> None:
    root = make_checkout(tmp_path)
    res = run(root, *OK, env={"HPCVAL_VAR": str(tmp_path / "v$(touch INJ_VAR)")})
    assert_clean_failure(res, 2, "HPCVAL_VAR")
    assert not list(tmp_path.rglob("INJ_VAR")) and not Path("INJ_VAR").exists()


def test_corrupt_store_named_and_rebuilt(stored: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    db = stored / "var" / "local" / "history.sqlite"
    assert db.is_file()
    runs_before = _runs_in_history(stored, monkeypatch, capsys)
    reports = tree_digest(stored / "var" / "local" / "reports")
    db.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    res = run_inprocess(stored, "history", "--site", "local", monkeypatch=monkeypatch,
                        capsys=capsys)
    assert_clean_failure(res, 3, str(db), "hpcval store rebuild")
    # every reader of the store: exit 3 naming it, never a verdict without its
    # history; `report` leaves the HTML reports as they were
    html = tree_digest(stored / "var" / "local" / "html")
    for args in (("report",), ("trend",), ("export",), ("history",)):
        res = run_inprocess(stored, *args, "--site", "local", monkeypatch=monkeypatch,
                            capsys=capsys)
        assert_clean_failure(res, 3, str(db), "corrupt")
        assert "RESULT:" not in res.stdout, (args, res.stdout)
    assert tree_digest(stored / "var" / "local" / "html") == html
    # a run on a corrupt store: refused before any benchmark runs, exit 3, the store named
    res = run(stored, *OK)
    assert_clean_failure(res, 3, str(db), "corrupt", "hpcval store rebuild")
    assert "hpcval: run " not in res.stdout, res.stdout
    assert tree_digest(stored / "var" / "local" / "reports") == reports
    rebuilt = run_inprocess(stored, "store", "rebuild", "--site", "local",
                            monkeypatch=monkeypatch, capsys=capsys)
    assert rebuilt.returncode == 0, rebuilt.output
    # nothing lost
    assert _runs_in_history(stored, monkeypatch, capsys) == runs_before


def test_lock_held_names_holder(stored: Path) -> None:
    """Another validation holds the site lock: a second one waits its
    --lock-timeout and exits 3 naming the holder; the store is unchanged."""
    from hpcval.run.lock import site_lock

    before = tree_digest(stored / "var" / "local" / "reports")
    with site_lock(stored / "var" / "local" / "validate.lock", "validate run HOLDER-TEST", 5):
        res = run(stored, "validate", "--site", "local", "--lock-timeout", "1", "--",
                  "-c", str(CHECKS), "-n", "fake_imb_check.*mode=ok$")
    assert_clean_failure(res, 3, "validate.lock", "HOLDER-TEST", "--lock-timeout")
    assert tree_digest(stored / "var" / "local" / "reports") == before


def test_two_validations_at_once_both_stored(stored: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Started together: both complete, both are stored, each prints its own verdict."""
    runs_before = _runs_in_history(stored, monkeypatch, capsys)
    results: list[Result] = []

    def one() -> None:
        proc = subprocess.run([str(BIN / "hpcval"), *OK], cwd=stored, text=True,
                              capture_output=True, timeout=600,
                              env={**os.environ, "HPCVAL_ROOT": str(stored)})
        results.append(Result(proc.returncode, proc.stdout, proc.stderr))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.returncode for r in results] == [0, 0], [r.output for r in results]
    ids = {w for r in results for w in r.stdout.split() if "Z-" in w and w[:8].isdigit()}
    assert len(ids) >= 2
    assert _runs_in_history(stored, monkeypatch, capsys) == runs_before + 2


def test_existing_store_on_a_read_only_disk_is_named_read_only(tmp_path: Path,
                                                               mount_tmpfs) -> None:
    """A store that became read-only (a remounted disk) is reported as such,
    not as unusable with a rebuild hint a read-only disk cannot follow."""
    from hpcval.history.store import Store

    fs = mount_tmpfs("4m")
    with Store(fs / "local" / "history.sqlite").connect(write=True):
        pass
    remount = subprocess.run(["mount", "-o", "remount,ro", str(fs)], capture_output=True,
                             text=True, check=False)
    if remount.returncode != 0:
        pytest.skip(f"cannot remount read-only: {remount.stderr.strip()}")
    res = run(make_checkout(tmp_path), "history", "--site", "local",
              env={"HPCVAL_VAR": str(fs)})
    assert_clean_failure(res, 3, "history.sqlite", "read-only", f"make {fs / 'local'} writable")
    assert "rebuild" not in res.output


def test_disk_full_during_the_run(tmp_path: Path, mount_tmpfs) -> None:
    """The disk fills while the benchmark runs (after the start-up check of
    free space): exit 3 naming "disk full" and the path; the logging errors
    ReFrame then prints are one line each, not the stacks Python's logging
    prints for them."""
    root = make_checkout(tmp_path)
    fs = mount_tmpfs("72m")
    res = run(root, "validate", "--site", "local", "--", "-c", str(CHECKS),
              "-n", "fake_disk_fill_check", env={"HPCVAL_VAR": str(fs)})
    assert_clean_failure(res, 3, str(fs / "local"), "disk full")
    frames = [ln for ln in res.output.splitlines() if ln.lstrip().startswith('File "')]
    assert not frames, "\n".join(frames[:5])
    assert "Call stack:" not in res.output


def test_rebuild_waits_for_a_validation(stored: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """`store rebuild` moves the store aside: not while a validation (which
    would store its run into the file moved aside) holds the site lock. It
    waits --lock-timeout and exits 3 naming the holder; the store is untouched."""
    from hpcval.run.lock import site_lock

    before = tree_digest(stored / "var" / "local")
    with site_lock(stored / "var" / "local" / "validate.lock", "validate run HOLDER-TEST", 5):
        res = run_inprocess(stored, "store", "rebuild", "--site", "local", "--lock-timeout",
                            "0.5", monkeypatch=monkeypatch, capsys=capsys)
    assert_clean_failure(res, 3, "validate.lock", "HOLDER-TEST", "--lock-timeout")
    assert tree_digest(stored / "var" / "local") == before


def test_rebuild_never_replaces_a_file_kept_aside(stored: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Each rebuild keeps the corrupt file it replaces under a name of its own,
    even where an earlier rebuild in the same second kept one; a healthy store
    is replaced without a copy (test_orphans.py)."""
    import time

    var = stored / "var" / "local"
    db = var / "history.sqlite"
    healthy = db.read_bytes()
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"this is not a database" * 100)
    earlier = {}
    for t in (time.time(), time.time() + 1):  # this second and the next
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(t))
        path = var / f"history.sqlite.{stamp}.broken"
        path.write_bytes(f"kept by an earlier rebuild {stamp}".encode())
        earlier[path] = path.read_bytes()
    live = (var / "history.sqlite").read_bytes()
    kept_before = set(var.glob("history.sqlite.*.broken"))
    res = run_inprocess(stored, "store", "rebuild", "--site", "local",
                        monkeypatch=monkeypatch, capsys=capsys)
    assert res.returncode == 0, res.output
    for path, data in earlier.items():
        assert path.read_bytes() == data
        path.unlink()
    (kept,) = set(var.glob("history.sqlite.*.broken")) - kept_before
    assert kept.read_bytes() == live
    kept.unlink()
    assert healthy


def _drop_verdicts(db: Path) -> None:
    import sqlite3

    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("DROP TABLE verdicts")
        conn.commit()


def _damage_pages(db: Path) -> None:
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    last = len(data) // page
    for number in (last - 1, last):  # the cell pointers of the last two pages
        start = (number - 1) * page
        data[start + 8:start + 24] = b"\xff" * 16
    db.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, named", [
    (_drop_verdicts, "table(s) verdicts missing"),
    (_damage_pages, "results store is corrupt"),
], ids=["table-dropped", "pages-damaged"])
def test_damaged_store_named_in_one_line(stored: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str],
                                         damage: Callable[[Path], None], named: str) -> None:
    """A store that lost a table (which opening it for writing made anew,
    empty) or whose pages are damaged (SQLite names every problem on a line
    of its own) is corrupt: exit 3, one line, the rebuild named."""
    db = stored / "var" / "local" / "history.sqlite"
    runs = _runs_in_history(stored, monkeypatch, capsys)
    saved = db.read_bytes()
    try:
        for suffix in ("-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        damage(db)
        for command in ("history", "store"):
            args = ("store", "check") if command == "store" else ("history",)
            res = run_inprocess(stored, *args, "--site", "local", monkeypatch=monkeypatch,
                                capsys=capsys)
            assert_clean_failure(res, 3, str(db), named, "hpcval store rebuild")
            assert len(res.stderr.strip().splitlines()) == 1, res.stderr
        rebuilt = run_inprocess(stored, "store", "rebuild", "--site", "local",
                                monkeypatch=monkeypatch, capsys=capsys)
        assert rebuilt.returncode == 0, rebuilt.output
        assert _runs_in_history(stored, monkeypatch, capsys) == runs
    finally:
        for kept in db.parent.glob("history.sqlite.*.broken*"):
            kept.unlink()
        for suffix in ("-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        db.write_bytes(saved)


def test_locked_store_named_before_any_benchmark(stored: Path) -> None:
    """Another process holds the results store's write lock: validate says
    it waits on it (at most --lock-timeout, 60 s at most), then exits 3
    naming the store before any benchmark ran; released in time, the run
    goes on."""
    import sqlite3

    db = stored / "var" / "local" / "history.sqlite"
    before = tree_digest(stored / "var" / "local" / "reports")
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        res = run(stored, "validate", "--site", "local", "--lock-timeout", "1", "--",
                  "-c", str(CHECKS), "-n", "fake_imb_check.*mode=ok$")
    finally:
        conn.execute("ROLLBACK")
        conn.close()
    assert "waiting for the results store" in res.stderr, res.output
    assert_clean_failure(res, 3, str(db), "locked")
    assert "hpcval: run " not in res.stdout
    assert tree_digest(stored / "var" / "local" / "reports") == before


def test_an_empty_report_never_becomes_the_latest(stored: Path) -> None:
    """A run report cut short (0 bytes, half a document: a disk that filled
    as ReFrame wrote it) is passed over by `report` and `references capture`,
    saying so; the latest whole run is used."""
    reports = stored / "var" / "local" / "reports"
    empty = reports / "run-report-29990101T000000Z-000000.json"
    half = reports / "run-report-29990101T000001Z-000000.json"
    empty.write_bytes(b"")
    half.write_text('{"session_info": {"cmdline": "reframe')
    try:
        res = run(stored, "report", "--site", "local")
        assert res.returncode == 0, res.output
        assert f"{empty}: empty or cut short" in res.stderr
        assert f"{half}: empty or cut short" in res.stderr
        assert "RESULT: PASS" in res.stdout
        assert str(empty) not in res.stdout and str(half) not in res.stdout
    finally:
        empty.unlink()
        half.unlink()
