"""One declaration of a figure: its direction, and its samples as stored with a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcval.core.errors import HpcvalError
from hpcval.core.figures import Figure, band_bounds, stored_direction, unit_kind, worse_side_band
from hpcval.core.series import (
    SAMPLES_FILE,
    load_samples,
    load_series,
    median,
    write_samples,
    write_series,
)


@pytest.mark.parametrize(("name", "unit", "direction"), [
    ("lat_8B", "us", "lower"),
    ("allreduce_t_64KiB", "us", "lower"),
    ("step_time", "s", "lower"),
    ("bw_1MiB", "MB/s", "higher"),
    ("unirandom_rate_1KiB", "msg/s", "higher"),
    ("gflops", "GFLOP/s", "higher"),
])
def test_undeclared_direction_is_the_units(name: str, unit: str, direction: str) -> None:
    assert Figure(name, unit).direction == direction


@pytest.mark.parametrize(("name", "unit"), [("output_share", "fraction"), ("cpu_busy", "%"),
                                            ("latency", "furlongs")])
def test_a_unit_without_direction_needs_a_declared_one(name: str, unit: str) -> None:
    """No name decides a direction: ``cpu_busy`` in % must say it is lower."""
    with pytest.raises(ValueError, match="declare better="):
        Figure(name, unit)
    assert Figure(name, unit, better="lower").direction == "lower"


def test_units_merge_times_of_minutes_and_hours() -> None:
    assert unit_kind("min") == unit_kind("h") == unit_kind("us") == "time"
    assert unit_kind("Mbytes/sec") == "bandwidth"
    assert unit_kind("%") == "percent"


def test_stored_direction_of_old_data() -> None:
    """Data stored before directions were has none: the unit decides where it
    can, else the direction is unknown (a name is never read)."""
    assert stored_direction("lower", "MB/s") == "lower"  # the stored one wins
    assert stored_direction(None, "us") == "lower"
    assert stored_direction("", "MB/s") == "higher"
    assert stored_direction(None, "%") is None
    assert stored_direction("up", "fraction") is None


def test_band_arithmetic() -> None:
    assert band_bounds(100.0, -0.1, 0.2) == pytest.approx((90.0, 120.0))
    assert band_bounds(-100.0, -0.1, None) == pytest.approx((-110.0, None))
    assert band_bounds(0.0, -0.1, 0.2) == (-0.1, 0.2)
    assert band_bounds(None, -0.1, 0.2) == (None, None)
    assert worse_side_band(0.2, "lower") == (None, 0.2)
    assert worse_side_band(0.2, "higher") == (-0.2, None)
    assert worse_side_band(0.2, None) == (-0.2, 0.2)


def test_declared_direction_wins_and_is_checked() -> None:
    assert Figure("tuned_vs_default", "%", better="lower").direction == "lower"
    with pytest.raises(ValueError, match="better must be one of"):
        Figure("x", "s", better="faster")


def test_samples_file_has_the_agreed_shape(tmp_path: Path) -> None:
    write_samples(tmp_path, "bw_1MiB", [10, 12.5, 11, 9, 13], "MB/s", "higher")
    write_samples(tmp_path, "lat_8B", [2.0, 2.1, 1.9, 2.2, 2.0], "us", "lower")
    data = json.loads((tmp_path / SAMPLES_FILE).read_text())
    assert data == {
        "bw_1MiB": {"unit": "MB/s", "better": "higher", "samples": [10.0, 12.5, 11.0, 9.0, 13.0]},
        "lat_8B": {"unit": "us", "better": "lower", "samples": [2.0, 2.1, 1.9, 2.2, 2.0]},
    }
    assert load_samples(tmp_path / "absent", tmp_path) == data
    assert median(data["bw_1MiB"]["samples"]) == 11.0
    assert [p.name for p in tmp_path.iterdir()] == [SAMPLES_FILE]  # no temporary left


def test_bad_direction_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HpcvalError, match="bw: better must be one of"):
        write_samples(tmp_path, "bw", [1.0], "MB/s", "up")


def test_series_round_trip_and_unreadable_file(tmp_path: Path) -> None:
    write_series(tmp_path, "PingPong", "message size", "B",
                 {"t_usec": ("us", [(0, 1.5), (8, 1.6)])}, {"lat_8B": ("t_usec", 8)})
    series = load_series(None, tmp_path)
    assert series["PingPong"]["judged"] == {"lat_8B": {"column": "t_usec", "x": 8}}
    (tmp_path / "hpcval-series.json").write_text("{broken")
    assert load_series(tmp_path) == {}
