"""`hpcval lab inject` given too little: one line and exit 2, never a traceback;
without arguments it lists the faults (exit 0). Neither touches a lab."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.lab import nodeview

from .conftest import run_inprocess


def test_lab_inject_without_arguments_lists_the_faults(
        module_checkout: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    res = run_inprocess(module_checkout, "lab", "inject", monkeypatch=monkeypatch,
                        capsys=capsys)
    assert res.returncode == 0, res.output
    assert [ln.split()[0] for ln in res.stdout.splitlines()] == list(nodeview.FAULTS)


def test_lab_inject_node_without_fault_is_one_line_exit_2(
        module_checkout: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    res = run_inprocess(module_checkout, "lab", "inject", "lab-n3", monkeypatch=monkeypatch,
                        capsys=capsys)
    assert res.returncode == 2, res.output
    assert res.error_line().startswith("hpcval: error: lab inject lab-n3: give a FAULT too")
    assert "Traceback" not in res.output
