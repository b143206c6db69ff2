"""WRF output verification on real em_quarter_ss outputs (WRF 4.3.3, 10 minutes):
the 1-rank and 2-rank runs, and a run perturbed by a 10 s instead of 12 s time
step. The files are subsets of the real wrfout files (the judged fields, bottom
four model levels; see their ``hpcval_subset`` attribute)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.core.errors import ParseError
from hpcval.parsers import wrf

netCDF4 = pytest.importorskip("netCDF4", reason="output verification needs netCDF4 "
                              "(pip install hpcval[wrf]; make setup installs it)")

DATA = Path(__file__).resolve().parents[1] / "data" / "wrf"
NP1 = str(DATA / "quarter_ss_np1_wrfout_0010.nc")
NP2 = str(DATA / "quarter_ss_np2_wrfout_0010.nc")
PERTURBED = str(DATA / "quarter_ss_np2_dt10_wrfout_0010.nc")
EARLIER = str(DATA / "quarter_ss_np1_wrfout_0005.nc")
TOLERANCE = 1e-3  # the idealized check's default output_tolerance


def test_decomposition_does_not_change_the_fields() -> None:
    diffs = wrf.compare_output(NP2, NP1)
    assert [d.name for d in diffs] == list(wrf.DEFAULT_FIELDS)
    assert all(d.rms_rel_diff == 0.0 and d.max_abs_diff == 0.0 for d in diffs)
    wrf.check_output(diffs, TOLERANCE, NP2, NP1)


def test_perturbed_run_fails_naming_field_and_difference() -> None:
    diffs = {d.name: d for d in wrf.compare_output(PERTURBED, NP1)}
    assert all(d.rms_rel_diff > 0 for d in diffs.values())
    assert diffs["W"].rms_rel_diff > TOLERANCE > diffs["T"].rms_rel_diff
    with pytest.raises(ParseError) as err:
        wrf.check_output(list(diffs.values()), TOLERANCE, PERTURBED, NP1)
    text = str(err.value)
    assert "W: rms rel diff" in text and "T: rms rel diff" not in text
    assert "beyond the tolerance 0.001" in text and PERTURBED in text


def test_reference_of_another_model_time_is_refused() -> None:
    with pytest.raises(ParseError, match="has no output for 0001-01-01_00:10:00"):
        wrf.compare_output(NP1, EARLIER)


def test_missing_field_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="no field 'RAINNC'"):
        wrf.compare_output(NP2, NP1, fields=("T", "RAINNC"))
    with pytest.raises(ParseError, match="cannot read WRF output"):
        wrf.compare_output(str(tmp_path / "missing.nc"), NP1)
    garbage = tmp_path / "garbage.nc"
    garbage.write_text("not netCDF\n")
    with pytest.raises(ParseError, match="cannot read reference output"):
        wrf.compare_output(NP2, str(garbage))


def test_nan_in_the_run_is_an_error(tmp_path: Path) -> None:
    import shutil

    broken = tmp_path / "nan.nc"
    shutil.copy(NP2, broken)
    with netCDF4.Dataset(broken, "a") as ds:
        ds.variables["T"][0, 0, 0, 0] = float("nan")
    with pytest.raises(ParseError, match="field T holds NaN or Inf"):
        wrf.compare_output(str(broken), NP1)
