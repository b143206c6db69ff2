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
