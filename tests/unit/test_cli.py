"""The command line loads every sub-command (a broken import in any one of
them would take the whole `hpcval` command down)."""

from __future__ import annotations

import pytest

from hpcval.cli import build_parser, main

COMMANDS = ["compare", "history", "lab", "references", "report", "site", "spack", "store",
            "trend", "tune", "validate", "vet"]


def test_every_command_registered():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(COMMANDS) <= set(sub.choices)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_of_every_command(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert command in capsys.readouterr().out


def test_the_command_line_imports_no_heavy_library_before_it_needs_one():
    """Starting `hpcval` and concluding a run import neither ReFrame (it runs
    in its own process), scipy (only where a figure is tested), nor matplotlib
    (only `hpcval trend`): each costs a fixed fraction of a second per run."""
    import subprocess
    import sys

    code = ("import sys; from hpcval.cli import build_parser; build_parser(); "
            "import hpcval.run.runner, hpcval.run.verdicts, hpcval.reporting.report, "
            "hpcval.history.store; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'reframe', 'scipy', 'matplotlib', 'ruptures'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_site_files_are_checked_again_whenever_an_input_changes(tmp_path):
    """`validate` skips the site-file check when its inputs are what the last
    passing check saw; a changed byte, even with the same size and mtime, or a
    new check file, makes it check again."""
    import os
    import shutil
    from pathlib import Path

    from hpcval.run import runner
    from hpcval.site import Site

    root = Path(__file__).resolve().parents[2]
    shutil.copytree(root / "site-configs" / "local", tmp_path / "site-configs" / "local")
    (tmp_path / "reframe-checks").mkdir()
    site = Site.load("local", tmp_path)
    stamp = runner._site_files_stamp(site)
    assert stamp == runner._site_files_stamp(site)
    assert not runner._site_files_checked(site, stamp)
    site.var.mkdir(parents=True)
    (site.var / runner.SITE_FILES_STAMP).write_text(stamp)
    assert runner._site_files_checked(site, stamp)

    refs = site.references
    st = refs.stat()
    data = refs.read_bytes()
    refs.write_bytes(data.replace(b"us]", b"ms]", 1))
    os.utime(refs, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert refs.stat().st_size == st.st_size
    assert not runner._site_files_checked(site, runner._site_files_stamp(site))
    refs.write_bytes(data)
    assert runner._site_files_checked(site, runner._site_files_stamp(site))
    (tmp_path / "reframe-checks" / "new_check.py").write_text("x = 1\n")
    assert not runner._site_files_checked(site, runner._site_files_stamp(site))
