"""WRF namelist edits, input verification and installation lookup (no WRF needed)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from hpcval.core.errors import ParseError
from hpcval.node import mpi_abi
from hpcval.parsers import wrf

NAMELIST = """\
 &time_control
 run_days                            = 0,
 run_hours                           = 0,
 run_minutes                         = 60,
 run_seconds                         = 0,
 history_interval                    = 30,   10,   10,
 restart                             = .false.,
 restart_interval                    = 120,
 /

 &domains
 time_step                           = 12,
 time_step_fract_num                 = 0,
 time_step_fract_den                 = 1,
 max_dom                             = 1,
 /
"""


def test_namelist_values_and_steps():
    assert wrf.namelist_value(NAMELIST, "history_interval") == "30"
    assert wrf.run_seconds(NAMELIST) == 3600
    assert wrf.model_step(NAMELIST) == 12.0
    assert wrf.expected_steps(NAMELIST) == 300


def test_edit_keeps_nest_values_and_other_entries():
    text = wrf.edit_namelist(NAMELIST, {"history_interval": 5, "run_minutes": 30,
                                        "restart": True})
    assert "history_interval                    = 5, 10, 10," in text
    assert wrf.namelist_value(text, "restart") == ".true."
    assert wrf.expected_steps(text) == 150
    assert wrf.namelist_value(text, "restart_interval") == "120"


def test_edit_adds_to_group_or_refuses_unknown_key():
    text = wrf.edit_namelist(NAMELIST, {"frames_per_outfile": 1}, group="time_control")
    assert wrf.namelist_value(text, "frames_per_outfile") == "1"
    assert text.index("frames_per_outfile") < text.index("&domains")
    with pytest.raises(ParseError, match="no entry 'histroy_interval'"):
        wrf.edit_namelist(NAMELIST, {"histroy_interval": 5})


def test_fractional_step_and_mismatched_length():
    text = wrf.edit_namelist(NAMELIST, {"time_step": 7, "time_step_fract_num": 1,
                                        "time_step_fract_den": 2})
    assert wrf.model_step(text) == 7.5
    assert wrf.expected_steps(text) == 480
    with pytest.raises(ParseError, match="not a multiple"):
        wrf.expected_steps(wrf.edit_namelist(NAMELIST, {"time_step": 7}))


def test_model_time_round_trip():
    for stamp in ("0001-01-01_00:00:12", "2019-11-26_23:00:00"):
        assert wrf.format_model_time(wrf.model_seconds(stamp)) == stamp
    assert wrf.model_seconds("0001-01-01_00:00:07.5000") == 7.5
    with pytest.raises(ParseError, match="not a WRF time"):
        wrf.model_seconds("yesterday")


def _data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "conus"
    data.mkdir()
    for name, body in {"wrfinput_d01": b"input", "wrfbdy_d01": b"boundary",
                       "namelist.input": NAMELIST.encode()}.items():
        (data / name).write_bytes(body)
    lines = [f"{hashlib.sha256((data / n).read_bytes()).hexdigest()}  {n}\n"
             for n in sorted(os.listdir(data))]
    (data / wrf.MANIFEST).write_text("".join(lines))
    return data


def test_inputs_verify(tmp_path):
    data = _data_dir(tmp_path)
    assert sorted(wrf.verify_inputs(data)) == ["namelist.input", "wrfbdy_d01", "wrfinput_d01"]


def test_corrupt_and_missing_inputs_are_named(tmp_path):
    data = _data_dir(tmp_path)
    (data / "wrfbdy_d01").write_bytes(b"boundar")
    (data / "wrfinput_d01").unlink()
    with pytest.raises(ParseError) as err:
        wrf.verify_inputs(data)
    assert "wrfbdy_d01: sha256" in str(err.value) and "corrupt" in str(err.value)
    assert "wrfinput_d01: missing" in str(err.value)


def test_missing_or_malformed_manifest(tmp_path):
    data = _data_dir(tmp_path)
    (data / wrf.MANIFEST).write_text("abc  wrfinput_d01\n")
    with pytest.raises(ParseError, match="not '<sha256>  <file>'"):
        wrf.verify_inputs(data)
    (data / wrf.MANIFEST).unlink()
    with pytest.raises(ParseError, match="reinstall the data package"):
        wrf.verify_inputs(data)


def _fake_case(tmp_path: Path, name: str = "em_quarter_ss") -> Path:
    case = tmp_path / "WRF" / "test" / name
    case.mkdir(parents=True)
    for f in ("wrf.exe", "ideal.exe", "namelist.input"):
        (case / f).write_text("")
    return case


def test_find_case_dir_from_variable_or_path(tmp_path, monkeypatch):
    case = _fake_case(tmp_path)
    monkeypatch.delenv(wrf.WRF_DIR_VARIABLE, raising=False)
    assert wrf.find_case_dir("em_quarter_ss", path=str(tmp_path / "none")) is None
    monkeypatch.setenv(wrf.WRF_DIR_VARIABLE, str(tmp_path / "WRF"))
    assert wrf.find_case_dir("em_quarter_ss", path="") == case
    monkeypatch.setenv(wrf.WRF_DIR_VARIABLE, str(case))
    assert wrf.find_case_dir("em_quarter_ss", path="") == case
    monkeypatch.delenv(wrf.WRF_DIR_VARIABLE)
    main = tmp_path / "WRF" / "main"
    main.mkdir()
    (main / "wrf.exe").write_text("")
    (main / "wrf.exe").chmod(0o755)
    assert wrf.find_case_dir("em_quarter_ss", path=str(main)) == case


def test_mpi_mismatch_reads_linked_library(tmp_path):
    """wrf.exe's MPI, as what launches it asks (hpcval.node.mpi_abi)."""
    binary = tmp_path / "wrf.exe"
    binary.write_bytes(b"\x7fELF....libmpi_mpifh.so.40\x00libmpi.so.40\x00libc.so.6\x00")
    assert mpi_abi.linked_mpi_libraries(binary) == {"libmpi_mpifh.so.40", "libmpi.so.40"}
    assert mpi_abi.mpi_mismatch(binary, ["mpi", "openmpi"]) is None
    reason = mpi_abi.mpi_mismatch(binary, ["mpi", "impi"])
    assert reason and "libmpi.so.40" in reason and "libmpi.so.12" in reason
    assert mpi_abi.mpi_mismatch(binary, ["mpi"]) is None
