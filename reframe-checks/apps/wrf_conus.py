"""WRF CONUS benchmarks: step time, simulation speed and verified output.

Runs ``wrf.exe`` on NCAR's CONUS benchmark inputs at a set node and rank count.
The inputs come from the hpcval Spack data packages (``wrf-conus-12km-v4``,
``wrf-conus-2p5km-v4``, ``wrf-conus-12km-v3``), whose ``spack load`` sets the
variable the data set names below; they are linked into the stage directory,
never copied, after their sha256 have been checked against the manifest the
package wrote from the checksum-verified tarball. A missing or corrupt input
fails the check with the file's name.

Namelist edits: when the data set holds a restart file the run restarts from
it (``restart = .true.``, ``start_*`` = its time), as the published benchmark
hour does; the run length is ``run_hours``; history is written once, at the
end, and no restart file is written, so that no output step falls inside the
judged steps.

Figures (rules in docs/checks.md, "WRF"): mean and median time per steady step
(first step and I/O steps excluded), simulation speed, and GFLOP/s where a
published factor exists for the data set (the v3.9.1.1 12 km set only).
Sanity: ``SUCCESS COMPLETE WRF``, the expected number of steps, and, where the
data set ships a reference output for the run's end time, a field-by-field
comparison with it (netCDF4) within ``output_tolerance``.
"""

import os
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import ReframeError, SanityError

from hpcval.errors import HpcvalError
from hpcval.parsers import wrf
from hpcval.rfm import HpcvalTest

#: Data sets: variable set by the data package, its Spack name, and the
#: published GFLOP per time step where one exists.
DATA_SETS = {
    "conus12km_v4": {"variable": "HPCVAL_WRF_CONUS_12KM_V4", "package": "wrf-conus-12km-v4",
                     "gflop_per_step": None},
    "conus2p5km_v4": {"variable": "HPCVAL_WRF_CONUS_2P5KM_V4", "package": "wrf-conus-2p5km-v4",
                      "gflop_per_step": None},
    # WRF V3 parallel benchmark page: 0.418 GFLOP per 72 s step of this set.
    "conus12km_v3": {"variable": "HPCVAL_WRF_CONUS_12KM_V3", "package": "wrf-conus-12km-v3",
                     "gflop_per_step": 0.418},
}


class InputError(ReframeError):
    """Benchmark inputs are missing or corrupt."""


@rfm.simple_test
class wrf_conus_check(HpcvalTest, rfm.RunOnlyRegressionTest):
    descr = "WRF CONUS benchmark: step time, simulation speed, output verified"
    valid_systems = ["*"]
    valid_prog_environs = ["+mpi"]
    executable = "./wrf.exe"
    time_limit = "2h"
    tags = {"apps", "wrf", "conus"}

    #: NCAR CONUS data set (see DATA_SETS).
    data_set = parameter(list(DATA_SETS), loggable=True)

    #: Nodes to run on.
    #:
    #: :type: :class:`int`
    num_nodes = variable(int, value=1, loggable=True)

    #: MPI ranks per node; the partition's core count when unset.
    #:
    #: :type: :class:`int` or :obj:`None`
    ranks_per_node = variable(int, type(None), value=None, loggable=True)

    #: Simulated hours from the start (or restart) time.
    #:
    #: :type: :class:`int`
    run_hours = variable(int, value=1, loggable=True)

    #: Data directory; from the data package's variable when unset.
    #:
    #: :type: :class:`str` or :obj:`None`
    data_dir = variable(str, type(None), value=None)

    #: Restart file to start from when the data set holds several (e.g. one per
    #: compiler); the first in name order when unset.
    #:
    #: :type: :class:`str` or :obj:`None`
    restart_file = variable(str, type(None), value=None)

    #: Largest accepted rms(run - reference) / rms(reference) per field.
    #:
    #: :type: :class:`float`
    output_tolerance = variable(float, value=0.02, loggable=True)

    #: ``auto``: verify where the data set ships a reference output for the end
    #: time; ``required``: fail where it does not; ``off``.
    #:
    #: :type: :class:`str`
    verify_output = variable(str, value="auto", loggable=True)

    #: WRF run directory in use (found from the environment).
    #:
    #: :type: :class:`str`
    run_dir = variable(str, value="")

    #: Model time at the end of the run, ``YYYY-MM-DD_hh:mm:ss``.
    #:
    #: :type: :class:`str`
    end_time = variable(str, value="")

    #: Reference output for the end time shipped with the data set, if any.
    #:
    #: :type: :class:`str` or :obj:`None`
    reference_output = variable(str, type(None), value=None)

    #: What the output verification found (for the record).
    #:
    #: :type: :class:`str`
    output_verified = variable(str, value="not run", loggable=True)

    @run_after("setup")
    def find_inputs(self):
        spec = DATA_SETS[self.data_set]
        self.data_dir = self.data_dir or os.environ.get(spec["variable"])
        self.skip_if(not self.data_dir,
                     f"no {self.data_set} inputs: `spack load {spec['package']}` (sets "
                     f"${spec['variable']}) or set data_dir")
        extras_dir = self.current_environ.extras.get("wrf_dir")
        run_dir = wrf.find_run_dir(extras_dir)
        self.skip_if(run_dir is None,
                     f"no WRF run directory (wrf.exe with its tables): set "
                     f"${wrf.WRF_DIR_VARIABLE}, the environment's extras.wrf_dir, or put "
                     "wrf.exe on PATH")
        self.run_dir = str(run_dir)
        if "wrf" not in self.current_environ.features:
            mismatch = wrf.mpi_mismatch(run_dir / "wrf.exe", self.current_environ.features)
            self.skip_if(mismatch is not None,
                         f"{mismatch} (environment {self.current_environ.name})")
        per_node = self.ranks_per_node or self.current_partition.processor.num_cores or 1
        self.num_tasks_per_node = per_node
        self.num_tasks = self.num_nodes * per_node
        self.keep_files = ["rsl.error.0000", "rsl.out.0000", "namelist.input"]

    @run_before("run")
    def stage_inputs(self):
        data = Path(self.data_dir)
        if not data.is_dir():
            raise InputError(f"{self.data_set} inputs: {data} is not a directory")
        try:
            manifest = wrf.verify_inputs(data)
        except HpcvalError as err:
            raise InputError(str(err)) from None
        stage = Path(self.stagedir)
        # WRF's tables first, then the data set's files over them.
        for src in Path(self.run_dir).iterdir():
            if src.name != "namelist.input" and not src.name.startswith(("rsl.", "wrfout")):
                _link(src, stage / src.name)
        files = sorted(name for name in manifest if "/" not in name)
        restarts = [n for n in files if n.startswith("wrfrst_d01_")]
        chosen = self.restart_file or (restarts[0] if restarts else None)
        for name in files:
            if name.startswith("wrfrst_d01_") or name.startswith("namelist"):
                continue
            _link(data / name, stage / name)
        text = (data / "namelist.input").read_text()
        changes: dict[str, object] = {
            "run_days": 0, "run_hours": self.run_hours, "run_minutes": 0, "run_seconds": 0,
            "history_interval": self.run_hours * 60, "frames_per_outfile": 1,
            "restart_interval": self.run_hours * 60 + 60,
        }
        if chosen:
            if chosen not in manifest:
                raise InputError(f"restart file {chosen} is not among the inputs in {data}")
            stamp = chosen[len("wrfrst_d01_"):len("wrfrst_d01_") + 19]
            _link(data / chosen, stage / f"wrfrst_d01_{stamp}")
            year, month, rest = stamp.split("-")
            day, clock = rest.split("_")
            hour, minute, second = clock.split(":")
            changes |= {"restart": True, "start_year": int(year), "start_month": int(month),
                        "start_day": int(day), "start_hour": int(hour),
                        "start_minute": int(minute), "start_second": int(second)}
            start = stamp
        else:
            start = _start_time(text)
        text = wrf.edit_namelist(text, changes, group="time_control")
        (stage / "namelist.input").write_text(text)
        self.end_time = wrf.format_model_time(wrf.model_seconds(start) + self.run_hours * 3600)
        refs = [n for n in files if n.startswith(f"wrfout_d01_{self.end_time}")]
        self.reference_output = str(data / refs[0]) if refs else None

    def log(self):
        path = Path(self.stagedir) / "rsl.error.0000"
        try:
            text = path.read_text(errors="replace")
        except OSError as err:
            raise SanityError(f"cannot read {path}: {err.strerror}") from None
        namelist = (Path(self.stagedir) / "namelist.input").read_text()
        try:
            log = wrf.parse_wrf_log(text, source=str(path))
            wrf.check_complete(log, expected_steps=wrf.expected_steps(namelist))
            return log, wrf.figures(log, time_step=wrf.model_step(namelist))
        except HpcvalError as err:
            raise SanityError(str(err)) from None

    @sanity_function
    def completed_and_verified(self):
        log, _ = self.log()
        output = Path(self.stagedir) / f"wrfout_d01_{self.end_time}"
        if self.verify_output == "off":
            self.output_verified = "off"
            return True
        if self.reference_output is None:
            if self.verify_output == "required":
                raise SanityError(f"{self.data_set} ships no reference output for "
                                  f"{self.end_time}: cannot verify (verify_output=required)")
            self.output_verified = "no reference output published for this run"
            return True
        try:
            diffs = wrf.compare_output(str(output), self.reference_output)
            wrf.check_output(diffs, self.output_tolerance, str(output), self.reference_output)
        except HpcvalError as err:
            raise SanityError(str(err)) from None
        worst = max(diffs, key=lambda d: d.rms_rel_diff)
        self.output_verified = (f"{len(diffs)} fields within {self.output_tolerance:g} "
                                f"(worst {worst.name}: {worst.rms_rel_diff:.2g})")
        return True

    @sn.deferrable
    def figure(self, name):
        fig = self.log()[1]
        if name == "gflops":
            return DATA_SETS[self.data_set]["gflop_per_step"] / fig.mean_step
        return getattr(fig, name)

    @run_after("init")
    def set_perf_variables(self):
        self.perf_variables = {
            "mean_step": sn.make_performance_function(self.figure("mean_step"), "s"),
            "median_step": sn.make_performance_function(self.figure("median_step"), "s"),
            "speed": sn.make_performance_function(self.figure("speed"), "model_s/s"),
        }
        if DATA_SETS[self.data_set]["gflop_per_step"]:
            self.perf_variables["gflops"] = sn.make_performance_function(
                self.figure("gflops"), "GFLOP/s")


def _link(src: Path, dst: Path) -> None:
    if dst.is_symlink() or dst.exists():
        dst.unlink()
    os.symlink(src.resolve(), dst)


def _start_time(namelist: str) -> str:
    parts = [int(float(wrf.namelist_value(namelist, f"start_{k}")))
             for k in ("year", "month", "day", "hour", "minute", "second")]
    return "{:04d}-{:02d}-{:02d}_{:02d}:{:02d}:{:02d}".format(*parts)
