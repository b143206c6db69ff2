"""ReFrame's JSON run report, read: the test cases of a run, their judged
figures and where their outputs (series, samples) are kept.

The ground under everything that reads a stored run (the results store, the
report, comparisons, captured references); no page is drawn here.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval.core.errors import HpcvalError
from hpcval.core.figures import band_bounds
from hpcval.core.series import load_samples, load_series


@dataclass(frozen=True)
class PerfValue:
    """One judged figure of one test case."""

    variable: str
    value: float | None
    reference: float | None
    lower: float | None
    upper: float | None
    unit: str
    result: str

    def bounds(self) -> tuple[float | None, float | None]:
        """Absolute bounds, computed as ReFrame does."""
        return band_bounds(self.reference, self.lower, self.upper)


@dataclass
class CaseResult:
    """One test case (check × partition × environment) of a run."""

    check: str
    display_name: str
    system: str
    partition: str
    environ: str
    result: str
    fail_phase: str | None
    fail_reason: str | None
    mpi_stack: str
    perf: list[PerfValue]
    outputdir: str | None
    stagedir: str | None
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.result in ("pass", "xfail")

    @property
    def skipped(self) -> bool:
        return self.result == "skip"

    @property
    def aborted(self) -> bool:
        """Not run to its end: ReFrame aborted it when the run was stopped
        (a signal), before it could pass or fail."""
        return self.result == "abort"

    def series(self) -> dict[str, Any]:
        """Series the check recorded, from its output or stage directory."""
        return load_series(self.outputdir, self.stagedir)

    def samples(self) -> dict[str, Any]:
        """Samples of the judged figures, from its output or stage directory."""
        return load_samples(self.outputdir, self.stagedir)


@dataclass
class RunReport:
    """A ReFrame run report, reduced to what hpcval shows."""

    path: Path
    session: dict[str, Any]
    cases: list[CaseResult]

    @property
    def failures(self) -> list[CaseResult]:
        """Cases that failed; not those aborted by a stop (:attr:`not_run`)."""
        return [c for c in self.cases if not c.passed and not c.skipped and not c.aborted]

    @property
    def not_run(self) -> list[CaseResult]:
        """Cases ReFrame aborted when the run was stopped: neither passed nor failed."""
        return [c for c in self.cases if c.aborted]

    @property
    def skips(self) -> list[CaseResult]:
        return [c for c in self.cases if c.skipped]

    def skip_reasons(self) -> list[tuple[str, int]]:
        """Why cases were skipped: (reason, how many), most frequent first."""
        counts = Counter(skip_reason(c) for c in self.skips)
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))

    @property
    def all_skipped(self) -> bool:
        """Every test case skipped: nothing was validated (never ``PASS``)."""
        return bool(self.cases) and all(c.skipped for c in self.cases)

    @property
    def dry_run(self) -> bool:
        """Made by ``reframe --dry-run`` (or an abbreviation argparse takes):
        the cases "pass" without running, every figure without a value."""
        words = str(self.session.get("cmdline") or "").split()
        if any(len(w) > 4 and "--dry-run".startswith(w) for w in words):
            return True
        perf = [p for c in self.cases if c.passed for p in c.perf]  # a real pass has values
        return bool(perf) and all(p.value is None and p.result == "?" for p in perf)

    @property
    def config_file(self) -> str | None:
        """The ReFrame configuration file the run was made with (the last one
        ReFrame read, ``<builtin>`` aside), as the report names it."""
        files = [str(f) for f in self.session.get("config_files") or []
                 if str(f) != "<builtin>"]
        return files[-1] if files else None

    def headline(self) -> str:
        """``24 passed, 0 failed, 12 skipped: PASS``; a run stopped with cases
        not run that failed none ends ``INTERRUPTED``, never ``PASS``; a run
        whose every case was skipped ends ``NOTHING VALIDATED``."""
        passed = sum(c.passed for c in self.cases)
        failed = len(self.failures)
        not_run = f"{len(self.not_run)} not run, " if self.not_run else ""
        word = ("FAIL" if failed else "INTERRUPTED" if self.not_run
                else "NOTHING VALIDATED" if self.all_skipped else "PASS")
        return f"{passed} passed, {failed} failed, {not_run}{len(self.skips)} skipped: {word}"


def skip_reason(case: CaseResult) -> str:
    """A skip's reason, first line, without ReFrame's prefix: from the case's
    ``skip_reason`` (:class:`hpcval.rfm.HpcvalTest` records it; ReFrame 4.10's
    report has no reason for a skip), else ReFrame's ``fail_reason``."""
    reason = (str(case.raw.get("skip_reason") or "") or case.fail_reason
              or "no reason given").splitlines()[0]
    for prefix in ("SkipTestError: ", "skipped: "):
        reason = reason.removeprefix(prefix)
    return reason.strip() or "no reason given"


def load_run_report(path: str | Path) -> RunReport:
    """Read a ReFrame JSON run report (the last run of each test case counts,
    so retries replace failures). A fixture that passed (e.g. the build of a
    program the cases share) is left out; one that failed is a failed case."""
    path = Path(path)
    try:
        if path.exists() and not path.is_dir() and not path.is_file():
            raise HpcvalError(f"{path}: not a regular file (a device or a pipe), not a run "
                              "report; give a run report file or a run id")
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise HpcvalError(f"{path}: run report not found (give its path, its file name in "
                          "var/<site>/reports/ or its run id; `hpcval history` lists the "
                          "stored runs)") from None
    except IsADirectoryError:
        raise HpcvalError(f"{path}: a directory, not a run report; give a run report file "
                          "(var/<site>/reports/run-report-<run id>.json) or a run id") from None
    except (OSError, ValueError) as err:
        raise HpcvalError(f"{path}: not a readable ReFrame run report: {err}") from None
    try:
        runs = data["runs"]
        session = data["session_info"]
    except (KeyError, TypeError):
        raise HpcvalError(f"{path}: not a ReFrame run report (no 'runs'/'session_info')") \
            from None
    latest: dict[str, dict[str, Any]] = {}
    try:
        for run in runs:
            for tc in run.get("testcases", []):
                if tc.get("fixture") and tc.get("result") == "pass":
                    continue  # what a case needed (a build), not a case: only its failure counts
                key = f"{tc.get('unique_name')}@{tc.get('system')}:{tc.get('partition')}+" \
                      f"{tc.get('environ')}"
                latest[key] = tc
        cases = [_case(tc) for tc in latest.values()]
    except (AttributeError, TypeError, ValueError) as err:
        raise HpcvalError(f"{path}: not a ReFrame run report (runs/testcases of the wrong "
                          f"shape: {err})") from None
    return RunReport(path, session, cases)


def _case(tc: dict[str, Any]) -> CaseResult:
    perf = []
    for key, vals in (tc.get("perfvalues") or {}).items():
        var = key.rsplit(":", 1)[-1]
        value, ref, lower, upper, unit, result = (list(vals) + [None] * 6)[:6]
        perf.append(PerfValue(var, value, ref, lower, upper, unit or "", result or "?"))
    display = tc.get("display_name") or tc.get("name", "?")
    return CaseResult(
        check=display.split()[0],
        display_name=display,
        system=tc.get("system", "?"),
        partition=tc.get("partition", "?"),
        environ=tc.get("environ", "?"),
        result=tc.get("result", "?"),
        fail_phase=tc.get("fail_phase"),
        fail_reason=tc.get("fail_reason") or _deps_reason(tc),
        mpi_stack=str(tc.get("mpi_stack", "")),
        perf=perf,
        outputdir=tc.get("outputdir"),
        stagedir=tc.get("stagedir"),
        raw=tc,
    )


def _deps_reason(tc: dict[str, Any]) -> str | None:
    """Why ReFrame did not run a case whose fixtures (e.g. its program's build)
    failed: it gives no reason of its own."""
    if tc.get("result") != "fail_deps":
        return None
    deps = ", ".join(f"{d[0]} ({d[2]})" for d in tc.get("dependencies_actual") or [] if d)
    return f"not run: what it needs failed first ({deps or 'a fixture'}; see its log)"

