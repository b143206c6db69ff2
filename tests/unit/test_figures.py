"""One declaration of a figure: its direction, and its samples as stored with a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcval.errors import HpcvalError
from hpcval.figures import Figure, better
from hpcval.series import (
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
    ("output_cost", "s", "lower"),
    ("output_share", "fraction", "lower"),
    ("cache_resident", "fraction", "lower"),
    ("cpu_busy", "%", "lower"),
    ("bw_1MiB", "MB/s", "higher"),
    ("unirandom_rate_1KiB", "msg/s", "higher"),
    ("stencil_fraction_of_triad", "fraction", "higher"),
    ("iallreduce_overlap_1MiB", "%", "higher"),
])
def test_direction_from_name_and_unit(name: str, unit: str, direction: str) -> None:
    assert better(name, unit) == direction
    assert Figure(name, unit).direction == direction


def test_declared_direction_wins_and_is_checked() -> None:
    assert Figure("tuned_vs_default", "%", better="lower").direction == "lower"
    with pytest.raises(ValueError, match="better must be one of"):
        Figure("x", "s", better="faster")


def test_samples_file_has_the_agreed_shape(tmp_path: Path) -> None:
    write_samples(tmp_path, "bw_1MiB", [10, 12.5, 11, 9, 13], "MB/s")
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
