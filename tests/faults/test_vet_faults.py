"""`hpcval vet` refused before it allocates anything, through the real command on
the `lab` site, with Slurm's client commands (sinfo, scontrol, salloc) replaced
by scripts that answer as an 8-node cluster whose ``MaxStepCount`` is 5: the
plan is refused with its numbers (exit 2), salloc is never called, and no
results directory is left behind (before, an empty one was)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import ROOT, assert_clean_failure, run

SCONTROL = """#!/bin/sh
case "$1 $2" in
  "show config") echo "MaxStepCount            = 5" ;;
  "show node") for i in 1 2 3 4 5 6 7 8; do
                 echo "NodeName=lab-n$i Arch=x86_64 State=IDLE Partitions=lab Reason="; done ;;
  "show topology") ;;
  *) echo "fake scontrol: $*" >&2; exit 1 ;;
esac
"""
SINFO = """#!/bin/sh
for i in 1 2 3 4 5 6 7 8; do echo lab-n$i; done
"""
SALLOC = """#!/bin/sh
touch "$(dirname "$0")/salloc-called"
echo "salloc: error: not in this test" >&2
exit 1
"""


@pytest.fixture
def fake_slurm(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("scontrol", SCONTROL), ("sinfo", SINFO), ("salloc", SALLOC)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HPCVAL_VAR": str(tmp_path / "var")}


def test_a_plan_past_max_step_count_leaves_no_results_directory(
        tmp_path: Path, fake_slurm: dict[str, str]) -> None:
    res = run(ROOT, "vet", "--site", "lab", "--quiet", env=fake_slurm)
    assert_clean_failure(res, 2, "MaxStepCount is 5", "srun steps in one job")
    assert "vet: plan: 8 nodes" in res.stderr  # the plan is still said first
    assert not (tmp_path / "bin" / "salloc-called").exists()
    vet_dir = tmp_path / "var" / "lab" / "vet"
    assert not vet_dir.exists() or [p.name for p in vet_dir.iterdir()] == []


def test_a_negative_confirm_is_refused(fake_slurm: dict[str, str]) -> None:
    res = run(ROOT, "vet", "--site", "lab", "--confirm", "-1", env=fake_slurm)
    assert_clean_failure(res, 2, "--confirm -1")
