"""Base tests for WRF: what every WRF check shares, and the two kinds of run.

* :class:`WrfBase`: ``wrf.exe`` on MPI ranks; reads rank 0's
  ``rsl.error.0000`` (:mod:`hpcval.parsers.wrf`), fails on a fatal error, a
  crash, a killed run or a step count other than the namelist asks for (run
  length from ``run_*`` or from the ``start_*``/``end_*`` dates); judges the
  step time and simulation speed over the steady steps (rules in
  :mod:`hpcval.parsers.wrf.log` and docs/checks.md, "WRF"): each steady step
  is a sample (at least ``samples`` of them, 5 by default), a figure's value
  their median; compares the output with a reference output where there is
  one (netCDF4); skips where the WRF found was built against another MPI than
  the environment's.
* :class:`WrfIdealizedBase`: an idealized case (``em_quarter_ss`` by
  default) that needs no input data: ``ideal.exe`` then ``wrf.exe``.
* :class:`WrfConusBase`: NCAR's CONUS benchmark inputs from hpcval's Spack
  data packages (``data_sets``: name -> variable, package, GFLOP per step),
  verified against their sha256 manifest and linked, never copied.

WRF is found through the environment, the Spack build first: the environment's
Spack-built ``wrf`` (its install prefix holds WRF's tree: ``test/<case>``,
``run/``), the environment's ``extras.wrf_dir``, ``$HPCVAL_WRF_DIR``, or
``wrf.exe`` on ``PATH``. WRF runs from its case or run directory (its tables
and inputs beside ``wrf.exe``), so the directory is found, not the program
alone (:func:`hpcval.parsers.wrf.find_case_dir`, :func:`~hpcval.parsers.wrf.find_run_dir`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import reframe as rfm
from reframe.core.builtins import run_after, run_before, sanity_function, variable
from reframe.core.exceptions import ReframeError, SanityError

from hpcval.core.errors import HpcvalError
from hpcval.core.figures import Figure
from hpcval.parsers import wrf
from hpcval.rfm.base import HpcvalTest

RSL = "rsl.error.0000"


class InputError(ReframeError):
    """Benchmark inputs are missing or corrupt."""


def link(src: Path, dst: Path) -> None:
    """``dst`` -> ``src`` (resolved), replacing what is there."""
    if dst.is_symlink() or dst.exists():
        dst.unlink()
    os.symlink(src.resolve(), dst)


class WrfBase(HpcvalTest, rfm.RunOnlyRegressionTest):
    """``wrf.exe``: completion, step-time figures, optional output verification."""

    valid_prog_environs = ["+mpi"]
    executable = "./wrf.exe"
    spack_package = "wrf"

    #: Per steady step: its wall time, and model seconds per wall second.
    figures = (Figure("step_time", "s", column="step_times"),
               Figure("speed", "model_s/s", column="step_speeds"))

    #: Largest accepted rms(run - reference) / rms(reference) per compared field.
    #:
    #: :type: :class:`float`
    output_tolerance = variable(float, value=1e-3, loggable=True)

    #: Known-good ``wrfout`` the run's last output is compared with (None: none).
    #:
    #: :type: :class:`str` or :obj:`None`
    reference_output = variable(str, type(None), value=None)

    #: What the output verification found (for the record).
    #:
    #: :type: :class:`str`
    output_verified = variable(str, value="not run", loggable=True)

    def wrf_dirs(self) -> list[str | None]:
        """Where to look for WRF, in order: the environment's Spack build, its
        ``extras.wrf_dir``; then (``None``) ``$HPCVAL_WRF_DIR`` and ``PATH``."""
        dirs = [self.spack_prefix(), self.current_environ.extras.get("wrf_dir")]
        return [*(str(d) for d in dirs if d), None]

    def use_wrf(self, exe: Path) -> None:
        """Skip where ``exe`` was linked against another MPI than the environment's
        (a WRF environment, feature ``wrf``, brings its own)."""
        if "wrf" not in self.current_environ.features:
            self.skip_other_mpi(str(exe))

    def write_namelist(self, text: str, changes: dict[str, object],
                       group: str | None = None) -> None:
        """The edited ``namelist.input`` into the stage directory."""
        edited = wrf.edit_namelist(text, changes, group=group)
        (Path(self.stagedir) / "namelist.input").write_text(edited)

    def log(self) -> tuple[wrf.WrfLog, wrf.WrfFigures]:
        """Rank 0's log, checked complete against the namelist, and its figures."""
        path = Path(self.stagedir) / RSL
        try:
            text = path.read_text(errors="replace")
        except OSError as err:
            raise SanityError(f"cannot read {path}: {err.strerror} (did wrf.exe start? see "
                              "the job output)") from None
        try:
            namelist = (Path(self.stagedir) / "namelist.input").read_text()
            log = wrf.parse_wrf_log(text, source=str(path))
            wrf.check_complete(log, expected_steps=wrf.expected_steps(namelist))
            return log, wrf.figures(log, time_step=wrf.model_step(namelist))
        except (HpcvalError, OSError) as err:
            raise SanityError(str(err)) from None

    def measure(self) -> dict[str, list[float]]:
        fig = self.log()[1]
        if fig.steps_used < self.samples:
            raise SanityError(f"{fig.steps_used} steady step(s), {self.samples} needed as "
                              "samples: run longer or write history less often")
        return {f.name: list(getattr(fig, f.column)) for f in self.figures if f.column}

    def verify(self, output: Path | None) -> None:
        """Compare ``output`` with ``reference_output`` field by field, if there is one."""
        if self.reference_output is None:
            self.output_verified = "no reference output configured"
            return
        if output is None or not output.is_file():
            raise SanityError(f"no WRF output {output or 'wrfout_d01_*'} in {self.stagedir} "
                              "to verify")
        try:
            diffs = wrf.compare_output(str(output), self.reference_output)
            wrf.check_output(diffs, self.output_tolerance, str(output), self.reference_output)
        except HpcvalError as err:
            raise SanityError(str(err)) from None
        worst = max(diffs, key=lambda d: d.rms_rel_diff)
        self.output_verified = (f"{len(diffs)} fields within {self.output_tolerance:g} "
                                f"(worst {worst.name}: {worst.rms_rel_diff:.2g})")


class WrfIdealizedBase(WrfBase):
    """An idealized case: ``ideal.exe`` on one rank, then ``wrf.exe``."""

    #: Idealized case (its ``test/<case>`` directory and ``compile_type``).
    #:
    #: :type: :class:`str`
    case = variable(str, value="em_quarter_ss", loggable=True)

    #: Simulated minutes (``run_minutes``).
    #:
    #: :type: :class:`int`
    run_minutes = variable(int, value=30, loggable=True)

    #: History interval in minutes; output steps are excluded from the figures.
    #:
    #: :type: :class:`int`
    history_interval = variable(int, value=10, loggable=True)

    #: Directory of the case; found from the environment when unset.
    #:
    #: :type: :class:`str` or :obj:`None`
    case_dir = variable(str, type(None), value=None)

    @run_after("setup")
    def find_wrf(self) -> None:
        dirs = [self.case_dir] if self.case_dir else self.wrf_dirs()
        found = next((c for c in (wrf.find_case_dir(self.case, wrf_dir=d) for d in dirs)
                      if c is not None), None)
        self.skip_if(found is None,
                     f"no WRF {self.case} case found: spack install wrf in the site's Spack "
                     f"environment, or set ${wrf.WRF_DIR_VARIABLE} to its directory (holding "
                     "wrf.exe, ideal.exe, namelist.input), the environment's extras.wrf_dir, "
                     "or put wrf.exe on PATH")
        assert found is not None
        self.case_dir = str(found)
        self.use_wrf(found / "wrf.exe")
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
        self.keep_files += [RSL, "rsl.out.0000", "namelist.input", "ideal"]

    @run_before("run")
    def stage_case(self) -> None:
        """Link the case's files in; write an edited namelist.input (the case's own
        is never modified): run length, history interval, no restart inside the run."""
        stage = Path(self.stagedir)
        for src in Path(str(self.case_dir)).iterdir():
            if src.name == "namelist.input" or src.name.startswith(("rsl.", "wrfout", "wrfrst")):
                continue
            if not (stage / src.name).exists():
                os.symlink(src.resolve(), stage / src.name)
        self.write_namelist((Path(str(self.case_dir)) / "namelist.input").read_text(), {
            "run_days": 0, "run_hours": 0, "run_minutes": self.run_minutes, "run_seconds": 0,
            "history_interval": self.history_interval,
            "restart_interval": self.run_minutes + 60,
        })

    @sanity_function
    def completed(self) -> bool:
        log, fig = self.log()
        start = wrf.model_seconds(log.steps[0].model_time) - fig.time_step
        self.record_series("WRF steps", "model time", "s", {
            "step time": ("s", [(wrf.model_seconds(s.model_time) - start, s.seconds)
                                for s in log.domain_steps(1)]),
        })
        outputs = sorted(Path(self.stagedir).glob("wrfout_d01_*"))
        self.verify(outputs[-1] if outputs else None)
        self.figure_samples()
        return True


class WrfConusBase(WrfBase):
    """NCAR's CONUS inputs (``data_set`` among ``data_sets``) on ``nodes`` nodes,
    one rank per core (or ``ranks_per_node``)."""

    time_limit = "2h"

    #: Data sets: name -> {"variable": env var set by the data package,
    #: "package": its Spack name, "gflop_per_step": published GFLOP per step or None}.
    #:
    #: :type: :class:`Dict[str, Dict]`
    data_sets: dict[str, dict[str, Any]] = {}

    #: One MPI rank per core of every node (``nodes`` of them, one by
    #: default); ``ranks_per_node`` sets another count per node
    #: (:mod:`hpcval.rfm.placement`).
    rank_count = "core"

    #: Simulated hours from the start (or restart) time.
    #:
    #: :type: :class:`int`
    run_hours = variable(int, value=1, loggable=True)

    #: Data directory; from the data package's variable when unset.
    #:
    #: :type: :class:`str` or :obj:`None`
    data_dir = variable(str, type(None), value=None)

    #: Restart file to start from when the data set holds several; the first
    #: in name order when unset.
    #:
    #: :type: :class:`str` or :obj:`None`
    restart_file = variable(str, type(None), value=None)

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

    @property
    def figures(self) -> tuple[Figure, ...]:  # type: ignore[override]
        """The step figures, and GFLOP/s per steady step where the data set
        has a published GFLOP per step."""
        if self.data_sets[self.data_set]["gflop_per_step"]:
            return (*WrfBase.figures, Figure("gflops", "GFLOP/s"))
        return WrfBase.figures

    def measure(self) -> dict[str, list[float]]:
        measured = super().measure()
        gflop = self.data_sets[self.data_set]["gflop_per_step"]
        if gflop:
            measured["gflops"] = [float(gflop) / t for t in measured["step_time"] if t > 0]
        return measured

    @run_after("setup")
    def find_inputs(self) -> None:
        spec = self.data_sets[self.data_set]
        self.data_dir = self.data_dir or os.environ.get(spec["variable"])
        self.skip_if(not self.data_dir,
                     f"no {self.data_set} inputs: `spack load {spec['package']}` (sets "
                     f"${spec['variable']}) or set data_dir")
        run_dir = next((r for r in (wrf.find_run_dir(d) for d in self.wrf_dirs())
                        if r is not None), None)
        self.skip_if(run_dir is None,
                     "no WRF run directory (wrf.exe with its tables): spack install wrf in the "
                     f"site's Spack environment, or set ${wrf.WRF_DIR_VARIABLE}, the "
                     "environment's extras.wrf_dir, or put wrf.exe on PATH")
        assert run_dir is not None
        self.run_dir = str(run_dir)
        self.use_wrf(run_dir / "wrf.exe")
        self.keep_files += [RSL, "rsl.out.0000", "namelist.input"]

    @run_before("run")
    def stage_inputs(self) -> None:
        """WRF's tables, then the data set's files over them (checked against the
        manifest); the namelist restarts from the data set's restart file where
        there is one and writes history once, at the end, and no restart file."""
        data, stage = Path(str(self.data_dir)), Path(self.stagedir)
        if not data.is_dir():
            raise InputError(f"{self.data_set} inputs: {data} is not a directory")
        try:
            manifest = wrf.verify_inputs(data)
            text = (data / "namelist.input").read_text()
        except (HpcvalError, OSError) as err:
            raise InputError(str(err)) from None
        for src in Path(self.run_dir).iterdir():
            if src.name != "namelist.input" and not src.name.startswith(("rsl.", "wrfout")):
                link(src, stage / src.name)
        files = sorted(name for name in manifest if "/" not in name)
        for name in files:
            if not name.startswith(("wrfrst_d01_", "namelist")):
                link(data / name, stage / name)
        restarts = [n for n in files if n.startswith("wrfrst_d01_")]
        chosen = self.restart_file or (restarts[0] if restarts else None)
        changes: dict[str, object] = {
            "run_days": 0, "run_hours": self.run_hours, "run_minutes": 0, "run_seconds": 0,
            "history_interval": self.run_hours * 60, "frames_per_outfile": 1,
            "restart_interval": self.run_hours * 60 + 60,
        }
        if chosen:
            if chosen not in manifest:
                raise InputError(f"restart file {chosen} is not among the inputs in {data}")
            start = chosen[len("wrfrst_d01_"):len("wrfrst_d01_") + 19]
            link(data / chosen, stage / f"wrfrst_d01_{start}")
            date, clock = start.split("_")
            values = [*date.split("-"), *clock.split(":")]
            changes["restart"] = True
            for unit, value in zip(("year", "month", "day", "hour", "minute", "second"),
                                   values, strict=True):
                changes[f"start_{unit}"] = int(value)
        else:
            try:
                start = wrf.start_time(text)
            except HpcvalError as err:
                raise InputError(f"{data / 'namelist.input'}: {err}") from None
        self.write_namelist(text, changes, group="time_control")
        self.end_time = wrf.format_model_time(wrf.model_seconds(start) + self.run_hours * 3600)
        refs = [n for n in files if n.startswith(f"wrfout_d01_{self.end_time}")]
        self.reference_output = str(data / refs[0]) if refs else None

    @sanity_function
    def completed_and_verified(self) -> bool:
        self.figure_samples()
        if self.verify_output == "off":
            self.output_verified = "off"
            return True
        if self.reference_output is None:
            if self.verify_output == "required":
                raise SanityError(f"{self.data_set} ships no reference output for "
                                  f"{self.end_time}: cannot verify (verify_output=required)")
            self.output_verified = "no reference output published for this run"
            return True
        self.verify(Path(self.stagedir) / f"wrfout_d01_{self.end_time}")
        return True
