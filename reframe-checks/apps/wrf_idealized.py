"""WRF idealized case: halo exchange and step time without external data.

Runs ``ideal.exe`` then ``wrf.exe`` of an idealized case (``em_quarter_ss`` by
default: a 3-D supercell, 41x41x40 points, 12 s step) built with the matching
``compile_type``. It needs no input data, so sites and the lab can exercise
WRF's halo exchange in minutes. The figures follow the same rules as the
CONUS check (docs/checks.md, "WRF"): the first step and the steps that write
history or restart output are excluded; mean and median step time and
simulation speed over the rest.

WRF is found through the environment: ``$HPCVAL_WRF_DIR`` (the case directory,
e.g. ``WRF/test/em_quarter_ss``, or the top of the WRF tree), the
environment's ``extras.wrf_dir``, or ``wrf.exe`` on ``PATH``. Where there is no
WRF, or it was built against another MPI than the environment's, the check is
skipped with the reason.
"""

import os
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpcval.errors import HpcvalError
from hpcval.parsers import wrf
from hpcval.rfm import HpcvalTest


@rfm.simple_test
class wrf_idealized_check(HpcvalTest, rfm.RunOnlyRegressionTest):
    descr = "WRF idealized case (no input data): step time and simulation speed"
    valid_systems = ["*"]
    valid_prog_environs = ["+mpi"]
    executable = "./wrf.exe"
    num_tasks = 2
    time_limit = "20m"
    tags = {"apps", "wrf", "halo"}

    #: Idealized case (its ``test/<case>`` directory and ``compile_type``).
    #:
    #: :type: :class:`str`
    case = variable(str, value="em_quarter_ss", loggable=True)

    #: Simulated minutes (``run_minutes``); 30 minutes are 150 steps of 12 s.
    #:
    #: :type: :class:`int`
    run_minutes = variable(int, value=30, loggable=True)

    #: History output interval in minutes; output steps are excluded from the
    #: figures, so a shorter interval leaves fewer steps to judge.
    #:
    #: :type: :class:`int`
    history_interval = variable(int, value=10, loggable=True)

    #: Directory of the case to run; found from the environment when unset.
    #:
    #: :type: :class:`str` or :obj:`None`
    case_dir = variable(str, type(None), value=None)

    #: A known-good ``wrfout`` of this case and configuration the run's last
    #: output is compared with, field by field (docs/checks.md, "Output
    #: verification"). Unset: the partition's ``extras.wrf_reference_outputs``
    #: (a mapping case -> file) is used, and without one nothing is compared.
    #:
    #: :type: :class:`str` or :obj:`None`
    reference_output = variable(str, type(None), value=None)

    #: Largest allowed rms relative difference of each compared field.
    #:
    #: :type: :class:`float`
    output_tolerance = variable(float, value=1e-3)

    #: What the output verification found (for the record).
    #:
    #: :type: :class:`str`
    output_verified = variable(str, value="not run", loggable=True)

    @run_after("setup")
    def find_wrf(self):
        extras_dir = self.current_environ.extras.get("wrf_dir")
        found = wrf.find_case_dir(self.case, wrf_dir=self.case_dir or extras_dir)
        self.skip_if(
            found is None,
            f"no WRF {self.case} case found: set ${wrf.WRF_DIR_VARIABLE} to its directory "
            f"(holding wrf.exe, ideal.exe, namelist.input), the environment's extras.wrf_dir, "
            "or put wrf.exe on PATH",
        )
        self.case_dir = str(found)
        if "wrf" not in self.current_environ.features:
            mismatch = wrf.mpi_mismatch(found / "wrf.exe", self.current_environ.features)
            self.skip_if(mismatch is not None, f"{mismatch} (environment "
                         f"{self.current_environ.name})")
        if self.reference_output is None:
            refs = self.current_partition.extras.get("wrf_reference_outputs") or {}
            self.reference_output = refs.get(self.case)
        if self.reference_output is not None and not Path(self.reference_output).is_file():
            raise SanityError(f"reference output {self.reference_output} for {self.case} does "
                              "not exist (reference_output, or the partition's "
                              "extras.wrf_reference_outputs)")
        mpirun = self.current_environ.extras.get("mpirun", "mpirun")
        # ideal.exe builds wrfinput_d01 on one rank; its rsl files are kept apart.
        self.prerun_cmds = [
            f"{mpirun} -np 1 ./ideal.exe > ideal.log 2>&1 || "
            "{ echo 'ideal.exe failed:'; tail -20 rsl.error.0000; exit 1; }",
            "mkdir -p ideal && mv rsl.* ideal/",
        ]
        self.keep_files = ["rsl.error.0000", "rsl.out.0000", "namelist.input", "ideal"]

    @run_before("run")
    def stage_case(self):
        """Link the case's files into the stage directory; write an edited
        namelist.input (the case's own is never modified)."""
        stage = Path(self.stagedir)
        for src in Path(self.case_dir).iterdir():
            dst = stage / src.name
            if src.name == "namelist.input" or src.name.startswith(("rsl.", "wrfout", "wrfrst")):
                continue
            if not dst.exists():
                os.symlink(src.resolve(), dst)
        text = (Path(self.case_dir) / "namelist.input").read_text()
        text = wrf.edit_namelist(text, {
            "run_days": 0, "run_hours": 0, "run_minutes": self.run_minutes, "run_seconds": 0,
            "history_interval": self.history_interval,
            # No restart file inside the run: a longer interval than the run.
            "restart_interval": self.run_minutes + 60,
        })
        (stage / "namelist.input").write_text(text)

    def log(self):
        path = Path(self.stagedir) / "rsl.error.0000"
        try:
            text = path.read_text(errors="replace")
        except OSError as err:
            raise SanityError(f"cannot read {path}: {err.strerror} (did ideal.exe or "
                              "wrf.exe start? see the job output and ideal.log)") from None
        namelist = (Path(self.stagedir) / "namelist.input").read_text()
        try:
            log = wrf.parse_wrf_log(text, source=str(path))
            wrf.check_complete(log, expected_steps=wrf.expected_steps(namelist))
            return log, wrf.figures(log, time_step=wrf.model_step(namelist))
        except HpcvalError as err:
            raise SanityError(str(err)) from None

    @sanity_function
    def completed(self):
        log, fig = self.log()
        start = wrf.model_seconds(log.steps[0].model_time) - fig.time_step
        self.record_series("WRF steps", "model time", "s", {
            "step time": ("s", [(wrf.model_seconds(s.model_time) - start, s.seconds)
                                for s in log.domain_steps(1)]),
        })
        self.verify()
        return True

    def verify(self) -> None:
        """Compare the last history output with ``reference_output``, if any."""
        if self.reference_output is None:
            self.output_verified = "no reference output configured"
            return
        outputs = sorted(Path(self.stagedir).glob("wrfout_d01_*"))
        if not outputs:
            raise SanityError(f"no wrfout_d01_* in {self.stagedir} to verify")
        try:
            diffs = wrf.compare_output(str(outputs[-1]), self.reference_output)
            wrf.check_output(diffs, self.output_tolerance, str(outputs[-1]),
                             self.reference_output)
        except HpcvalError as err:
            raise SanityError(str(err)) from None
        worst = max(diffs, key=lambda d: d.rms_rel_diff)
        self.output_verified = (f"{len(diffs)} fields within {self.output_tolerance:g} "
                                f"(worst {worst.name}: {worst.rms_rel_diff:.2g})")

    @sn.deferrable
    def figure(self, name):
        return getattr(self.log()[1], name)

    @run_after("init")
    def set_perf_variables(self):
        self.perf_variables = {
            "mean_step": sn.make_performance_function(self.figure("mean_step"), "s"),
            "median_step": sn.make_performance_function(self.figure("median_step"), "s"),
            "speed": sn.make_performance_function(self.figure("speed"), "model_s/s"),
        }
