"""Samples and figures (:mod:`hpcval.rfm.samples`), function by function."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from reframe.core.exceptions import SanityError

from hpcval.core.errors import ParseError
from hpcval.core.figures import Figure
from hpcval.rfm import samples
from hpcval.rfm.launch import ConfigFailure


def _partition(**extras: object) -> SimpleNamespace:
    return SimpleNamespace(fullname="s:p", extras=extras)


def test_bandwidth_ceiling_is_a_positive_number() -> None:
    assert samples.bandwidth_ceiling(_partition(max_bandwidth_mbs=1000)) == 1000.0
    assert samples.bandwidth_ceiling(_partition()) > 0
    for bad in ("fast", float("nan"), -1, True):
        with pytest.raises(ConfigFailure, match="is not a bandwidth ceiling"):
            samples.bandwidth_ceiling(_partition(max_bandwidth_mbs=bad))


def test_a_parse_failure_is_a_sanity_failure_naming_the_file(tmp_path: Path) -> None:
    def parser(text: str, source: str) -> str:
        if text != "ok":
            raise ParseError(f"{source}: garbage")
        return text

    good, bad = tmp_path / "good.out", tmp_path / "bad.out"
    good.write_text("ok")
    bad.write_text("??")
    assert samples.parse_output(good, parser) == "ok"
    with pytest.raises(SanityError, match="bad.out: garbage"):
        samples.parse_output(bad, parser)
    with pytest.raises(SanityError, match="cannot read .*none.out"):
        samples.parse_output(tmp_path / "none.out", parser)


class _Check:
    figures = (Figure("bw", "MB/s"), Figure("t", "s"))

    def __init__(self, stage: Path, measured: dict[str, list[float]]) -> None:
        self.stagedir = str(stage)
        self.keep_files: list[str] = []
        self.measured = measured
        self.calls = 0

    def measure(self) -> dict[str, list[float]]:
        self.calls += 1
        return self.measured

    def figure_samples(self) -> dict[str, list[float]]:
        return samples.figure_samples(self)


def test_samples_are_measured_once_and_stored_with_their_direction(tmp_path: Path) -> None:
    check = _Check(tmp_path, {"bw": [1.0, 3.0, 2.0], "t": [5.0]})
    assert samples.figure_value(check, "bw") == 2.0
    assert samples.figure_value(check, "t") == 5.0
    assert check.calls == 1
    stored = json.loads((tmp_path / check.keep_files[0]).read_text())
    assert "bw" in json.dumps(stored) and "higher" in json.dumps(stored)


def test_a_figure_without_samples_fails(tmp_path: Path) -> None:
    with pytest.raises(SanityError, match="t: no sample measured"):
        samples.figure_samples(_Check(tmp_path, {"bw": [1.0]}))
