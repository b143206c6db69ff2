"""A full disk is named as a full disk by every command that reads the
results store or writes a page: ``report``, ``trend``, ``export``,
``history``, ``store check``, ``compare``, ``references capture`` and
``store rebuild`` say "disk full" with the free space and exit 3, as
``validate`` does, never "unusable, rebuild it" (a rebuild on a full disk
fails too) nor exit 2. A small tmpfs is the full disk (root only, the
``mount_tmpfs`` fixture of test_environment_faults.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .conftest import OK_RUN, TRACEBACK, assert_clean_failure, make_checkout, run, tree_digest

pytestmark = pytest.mark.integration


def _fill(fs: Path, leave: int = 0) -> None:
    """Fill the file system of *fs* until less than *leave* bytes are free."""
    with open(fs / "filler", "ab") as f:
        chunk = b"\0" * 4096
        try:
            while shutil.disk_usage(fs).free > leave:
                f.write(chunk)
                f.flush()
        except OSError:
            pass


@pytest.fixture
def stored_site(tmp_path: Path) -> Path:
    """A checkout with one run stored and judged (on the ordinary disk)."""
    from .conftest import needs_impi

    needs_impi()
    root = make_checkout(tmp_path)
    res = run(root, *OK_RUN)
    assert res.returncode == 0, res.output
    return root


def test_a_full_var_is_named_by_every_reader(stored_site: Path, mount_tmpfs) -> None:
    """The whole results store on a full disk: every reader said "results
    store unusable (disk I/O error); rebuild it", and the rebuild failed on
    the full disk."""
    fs = mount_tmpfs("8m")
    shutil.copytree(stored_site / "var" / "local", fs / "local")
    run_id = next((fs / "local" / "verdicts").glob("*.json")).stem
    _fill(fs)
    before = tree_digest(fs / "local")
    env = {"HPCVAL_VAR": str(fs)}
    for args in (("report",), ("trend",), ("export",), ("history",), ("store", "check"),
                 ("compare", run_id, run_id), ("references", "capture", "--from-history"),
                 ("store", "rebuild")):
        res = run(stored_site, *args, "--site", "local", env=env)
        assert_clean_failure(res, 3, str(fs / "local"), "disk full", "KiB free")
        assert "store rebuild" not in res.error_line(), (args, res.error_line())
        assert "RESULT:" not in res.stdout
    after = tree_digest(fs / "local")  # SQLite's own -wal/-shm files aside
    assert {k: v for k, v in after.items() if not k.endswith(("-wal", "-shm"))} == before


def test_the_html_report_on_a_full_disk(stored_site: Path, mount_tmpfs) -> None:
    """The pages' directory on a full disk: `report` said "cannot write the
    HTML report" and exited 2 (wrong input)."""
    html = stored_site / "var" / "local" / "html"
    fs = mount_tmpfs("1m")
    shutil.rmtree(html)
    html.symlink_to(fs)
    _fill(fs)
    res = run(stored_site, "report", "--site", "local")
    assert_clean_failure(res, 3, str(html), "disk full", "KiB free")
    assert not [p for p in fs.iterdir() if p.name.endswith(".tmp")]


def test_the_html_directory_read_only(stored_site: Path, mount_tmpfs) -> None:
    """The pages' directory read-only (a remounted disk): `report` exited 2
    as for wrong input; `trend` named it already."""
    html = stored_site / "var" / "local" / "html"
    fs = mount_tmpfs("1m", readonly=True)
    shutil.rmtree(html)
    html.symlink_to(fs)
    for args in (("report",), ("trend",)):
        res = run(stored_site, *args, "--site", "local")
        assert_clean_failure(res, 3, str(html), "not writable")
        assert TRACEBACK not in res.output


def test_export_to_a_full_disk(stored_site: Path, mount_tmpfs) -> None:
    """`export -o` onto a full disk: exit 3 naming the free space; the file
    the collector reads stays whole, no temporary file is left."""
    fs = mount_tmpfs("1m")
    target = fs / "hpcval.prom"
    target.write_text("# an earlier export\n")
    _fill(fs)
    res = run(stored_site, "export", "--site", "local", "-o", str(target))
    assert_clean_failure(res, 3, str(target), "disk full", "KiB free")
    assert target.read_text() == "# an earlier export\n"
    assert sorted(p.name for p in fs.iterdir()) == ["filler", "hpcval.prom"]
