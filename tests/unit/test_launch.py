"""The launch of a check's job (:mod:`hpcval.rfm.launch`), function by function."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from hpcval.rfm import launch


def test_cleanup_lists_then_removes_what_the_program_left(tmp_path: Path) -> None:
    stage = str(tmp_path)
    assert launch.cleanup_cmds(stage, ".", "out.*") == [
        "ls -1d ./out.* 2>/dev/null > leftovers.txt || true", "rm -f ./out.*"]
    shared = launch.cleanup_cmds(stage, "/shared/my dir", "*.dat")
    assert shared[-1] == "rmdir '/shared/my dir' 2>/dev/null || true"
    assert launch.leftovers(stage) == []
    (tmp_path / launch.LEFTOVERS_FILE).write_text("a.dat\nb.dat\n")
    assert launch.leftovers(stage) == ["a.dat", "b.dat"]


def _test(tmp_path: Path, **extras: object) -> SimpleNamespace:
    return SimpleNamespace(
        stagedir=str(tmp_path), samples=3, unique_name="x_check",
        stdout=SimpleNamespace(evaluate=lambda: "rfm_job.out"),
        stderr=SimpleNamespace(evaluate=lambda: "rfm_job.err"),
        current_partition=SimpleNamespace(name="p", fullname="s:p", extras=extras),
        current_environ=SimpleNamespace(name="impi"))


def test_every_run_of_the_job_has_its_outputs(tmp_path: Path) -> None:
    test = _test(tmp_path)
    assert [p.name for p in launch.sample_outputs(test)] == [
        "rfm_job.out", "sample-2.out", "sample-3.out"]
    assert [p.name for p in launch.launch_outputs(test, 3)] == ["sample-3.out", "sample-3.err"]
    assert [p.name for p in launch.launch_outputs(test, 9)] == ["rfm_job.out", "rfm_job.err"]


def test_shared_directory_is_per_case_and_plain(tmp_path: Path) -> None:
    assert launch.shared_fs_dir(_test(tmp_path)) is None
    assert launch.shared_fs_dir(_test(tmp_path, shared_fs_dir="/mnt/fs")) == \
        "/mnt/fs/hpcval-x_check-p-impi"
    with pytest.raises(launch.ConfigFailure, match="holds a quote or a line break"):
        launch.shared_fs_dir(_test(tmp_path, shared_fs_dir="/mnt/it's"))
