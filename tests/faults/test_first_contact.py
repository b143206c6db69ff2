"""What a first-time user sees: library warnings in the log, not among the
verdicts; ReFrame's log in the site's results store, not the temp directory."""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

import pytest

from hpcval.core.fileio import warnings_to_log

from .conftest import OK_RUN, make_checkout, needs_impi, run


def test_library_warnings_go_to_the_log(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """scipy's precision warning (identical samples, as judging meets them)
    lands in the log with the command, not on the terminal."""
    import scipy.stats

    log = tmp_path / "var" / "local" / "hpcval.log"
    with warnings_to_log(log, "hpcval validate"):
        warnings.simplefilter("always")
        scipy.stats.ttest_ind([1.0, 1.0, 1.0], [1.0, 1.0, 1.0])
    out = capsys.readouterr()
    assert "RuntimeWarning" not in out.err + out.out
    text = log.read_text()
    assert "hpcval validate: " in text and "RuntimeWarning: Precision loss" in text


def test_warnings_reach_the_terminal_where_the_log_cannot_be_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log that cannot be written loses no warning: it is shown as before."""
    blocked = tmp_path / "file"
    blocked.write_text("")
    shown: list[str] = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *a, **k: shown.append(
        str(message)))
    with warnings_to_log(blocked / "hpcval.log", "hpcval report"):
        warnings.simplefilter("always")
        warnings.warn("kept", RuntimeWarning, stacklevel=1)
    assert shown == ["kept"]


def test_reframe_log_kept_in_the_results_store(tmp_path: Path) -> None:
    """ReFrame's start-up log (``rfm-*.log``, written before the site config
    is read) is moved from the temp directory into ``var/<site>/logs/``."""
    needs_impi()
    root = make_checkout(tmp_path)
    temp = Path(tempfile.gettempdir())
    before = set(temp.glob("rfm-*.log"))
    res = run(root, *OK_RUN)
    assert res.returncode == 0, res.output
    run_id = res.stdout.split("hpcval: run ", 1)[1].split()[0]
    kept = root / "var" / "local" / "logs" / f"{run_id}.reframe-start.log"
    assert kept.is_file(), sorted((root / "var" / "local" / "logs").iterdir())
    config = root / "site-configs" / "local" / "config.py"
    assert f"Loading configuration file: '{config}'" in kept.read_text()
    mine = [p for p in set(temp.glob("rfm-*.log")) - before
            if str(config) in p.read_text(errors="replace")]
    assert mine == [], mine


def test_first_contact_selects_one_case_per_family_on_one_stack() -> None:
    """`hpcval validate` without options that select: one case per benchmark
    family (FIRST_CONTACT) on the site's first MPI stack, as ReFrame itself
    lists them on the local site; an option that selects, --matrix full,
    --budget full or --record run every case."""
    import re
    import shlex
    import subprocess

    from hpcval.commands.validate import FIRST_CONTACT, first_contact_args, selects
    from hpcval.site import Site

    from .conftest import BIN, ROOT

    site = Site.load("local", ROOT)
    args, said = first_contact_args(site)
    assert "one case per benchmark family on MPI stack" in said
    listed = subprocess.run(
        [str(BIN / "reframe"), "-C", str(site.config), "-c", str(site.checks_dir), "-R", "-l",
         *args], capture_output=True, text=True, timeout=300,
        env={**os.environ, "HPCVAL_VAR": str(Path(tempfile.mkdtemp()))})
    cases = [ln[2:].rsplit(" /", 1)[0].replace(" ", "") for ln in listed.stdout.splitlines()
             if ln.startswith("- ")]
    assert cases, listed.stdout + listed.stderr
    for family, pattern in FIRST_CONTACT.items():
        hits = [c for c in cases if re.search(pattern, c)]
        assert len(hits) <= 1, (family, hits)
    assert len(cases) <= len(FIRST_CONTACT)
    assert "imb_pingpong_check%cache=warm" in cases, shlex.join(cases)
    assert selects(["-n", "x"]) and selects(["-pimpi"]) and selects(["--tag=mpi"])
    assert not selects(["-S", "budget=quick"]) and not selects(["--dry-run"])
