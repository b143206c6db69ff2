"""hpcval.core.trust on paths the corpus's commands do not reach: a loop of
symbolic links, a link whose target is missing, and nothing checked for a user
other than root (tests/faults/test_root_trust.py runs the commands)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpcval.core import trust

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the checks apply to root alone")


@root_only
def test_a_loop_of_links_is_refused_not_followed_forever(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(trust.UntrustedPath, match="more than 40 symbolic links"):
        trust.check_paths([tmp_path / "a"], "a test path")


@root_only
def test_a_missing_path_checks_what_is_above_it(tmp_path: Path) -> None:
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    trust.check_paths([tmp_path / "gone", tmp_path / "not-yet" / "x"], "a test path")
    tmp_path.chmod(0o777)
    with pytest.raises(trust.UntrustedPath, match="group- and world-writable"):
        trust.check_paths([tmp_path / "not-yet" / "x"], "a test path")
    tmp_path.chmod(0o700)


def test_nothing_is_checked_without_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    trust.check_paths([loose], "a test path")
    trust.check_code()
    loose.chmod(0o700)
