"""A stored multi-run history of a made-up site, for the report, trend and
export tests: every run is written as ReFrame writes its JSON run report (with
the samples file a check leaves in its output directory), then stored and
judged by hpcval's own code (:func:`hpcval.run.verdicts.store_and_judge`), as
``hpcval validate`` does after ReFrame has run. The figures are synthetic
(seeded log-normal samples around a level), their verdicts are real.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hpcval.core.runid import new_run_id
from hpcval.reporting.report import load_run_report
from hpcval.site import Site

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Fig:
    variable: str
    unit: str
    better: str
    level: float
    #: contract band as ReFrame thresholds around ``ref`` (None: unbounded)
    ref: float | None = None
    lower: float | None = None
    upper: float | None = None


@dataclass
class Case:
    check: str
    params: dict[str, str]
    figures: list[Fig]
    environ: str = "impi"
    partition: str = "default"


#: One case per area (the folder of its check under reframe-checks/), as the
#: local site's checks report them; PingPong's bands are the loose floors of
#: site-configs/local, the others tight.
CASES = [
    Case("imb_pingpong_check", {"cache": "warm"}, [
        Fig("bw_1MiB", "MB/s", "higher", 18700, 100, 0, None),
        Fig("lat_8B", "us", "lower", 0.13, 100, None, 0)]),
    Case("osu_bw_check", {}, [Fig("bw_4MiB", "MB/s", "higher", 12000, 12000, -0.05, 0.05)]),
    Case("stream_check", {}, [
        Fig("triad", "MB/s", "higher", 45000, 45000, -0.05, 0.05),
        Fig("copy", "MB/s", "higher", 40000, 40000, -0.05, 0.05)]),
    Case("ior_check", {"api": "posix"}, [
        Fig("write_bw", "MiB/s", "higher", 900, 900, -0.05, 0.05),
        Fig("read_bw", "MiB/s", "higher", 1500, 1500, -0.05, 0.05)]),
    Case("hpcg_check", {}, [Fig("gflops", "Gflop/s", "higher", 12.0, 12.0, -0.05, 0.05)]),
    Case("wrf_idealized_check", {}, [Fig("time_step", "s", "lower", 0.8, 0.8, -0.05, 0.05)]),
    Case("host_tuning_audit_check", {}, []),
]


@dataclass
class Change:
    """What is different in one run: a figure's level times ``factor``, a
    case failing (``fail_phase``/``reason``), or its value outside its band."""

    check: str
    variable: str | None = None
    factor: float = 1.0
    fail_phase: str | None = None
    reason: str = ""


@dataclass
class History:
    site: Site
    run_ids: list[str] = field(default_factory=list)


def make_site(tmp_path: Path, name: str = "demo") -> Site:
    root = tmp_path / "checkout"
    (root / "site-configs" / name).mkdir(parents=True)
    (root / "site-configs" / name / "config.py").write_text("")
    (root / "site-configs" / name / "judging.yaml").write_text("k: 5\nalpha: 0.05\n")
    (root / "reframe-checks").symlink_to(ROOT / "reframe-checks")
    return Site(name, root)


def write_run(site: Site, rng: np.random.Generator, cases: list[Case],
              changes: list[Change] = (), n: int = 5, noise: float = 0.02,
              run_noise: float = 0.015, start: float = 1.79e9) -> tuple[str, Path]:
    """One run report with its samples files; returns its run id and path."""
    run_id = new_run_id()
    testcases = []
    for i, case in enumerate(cases):
        out = site.var / "output" / run_id / f"case{i}"
        out.mkdir(parents=True)
        samples, perf = {}, {}
        failing = next((c for c in changes if c.check == case.check and c.fail_phase), None)
        band_failed = False
        for fig in case.figures:
            factor = np.prod([c.factor for c in changes
                              if c.check == case.check and c.variable == fig.variable])
            level = fig.level * factor * float(np.exp(rng.normal(0, run_noise)))
            vals = [float(v) for v in level * np.exp(rng.normal(0, noise, n))]
            value = float(np.median(vals))
            samples[fig.variable] = {"unit": fig.unit, "better": fig.better, "samples": vals}
            result = "pass"
            if fig.ref is not None:
                lo = None if fig.lower is None else fig.ref * (1 + fig.lower)
                hi = None if fig.upper is None else fig.ref * (1 + fig.upper)
                if (lo is not None and value < lo) or (hi is not None and value > hi):
                    result, band_failed = "fail", True
            perf[f"{site.name}:{case.partition}:{fig.variable}"] = [
                value, fig.ref, fig.lower, fig.upper, fig.unit, result]
        (out / "hpcval-samples.json").write_text(json.dumps(samples))
        (out / "rfm_job.out").write_text(f"{case.check}: {len(samples)} figure(s)\n")
        params = "".join(f" %{k}={v}" for k, v in case.params.items())
        tc = {"display_name": case.check + params, "unique_name": f"{case.check}_{i}",
              "system": site.name, "partition": case.partition, "environ": case.environ,
              "result": "pass", "fail_phase": None, "fail_reason": None,
              "outputdir": str(out), "stagedir": None, "mpi_stack": "intel-mpi@2021.13",
              "perfvalues": perf,
              "job_stdout": "rfm_job.out"}
        if failing is not None:
            tc.update(result="fail", fail_phase=failing.fail_phase,
                      fail_reason=failing.reason, perfvalues={})
        elif band_failed:
            tc.update(result="fail", fail_phase="performance",
                      fail_reason="performance error: failed to meet references")
        testcases.append(tc)
    path = site.report_path(run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "session_info": {"hostname": "node1", "version": "4.7.4", "time_start_unix": start,
                         "time_end_unix": start + 60, "cmdline": "reframe -r"},
        "runs": [{"testcases": testcases}]}))
    return run_id, path


def make_history(tmp_path: Path, runs: int = 8, cases: list[Case] | None = None,
                 last: list[Change] = (), seed: int = 1, record_all_but: int | None = None,
                 name: str = "demo", since: int | None = None) -> History:
    """``runs`` runs of ``cases`` stored and judged one after another, the
    last (or every run from index ``since`` on) with the changes ``last``.
    With ``record_all_but=m`` the runs before the last ``m`` are stored
    without judging (``validate --record``), which is what a long history
    costs least to make."""
    from hpcval.run.verdicts import store_and_judge

    site = make_site(tmp_path, name)
    rng = np.random.default_rng(seed)
    hist = History(site)
    for r in range(runs):
        changes = list(last) if r >= (runs - 1 if since is None else since) else []
        run_id, path = write_run(site, rng, cases or CASES, changes, start=1.79e9 + 86400 * r)
        record = record_all_but is not None and r < runs - record_all_but
        judged = store_and_judge(site, run_id, load_run_report(path), record=record)
        assert judged.store_error is None, judged.store_error
        hist.run_ids.append(run_id)
    return hist


def many_cases(figures: int) -> list[Case]:
    """``figures`` figures over cases of every area (for the page-size tests)."""
    checks = ["imb_pingpong_check", "osu_bw_check", "stream_check", "ior_check", "hpcg_check"]
    per_case = 10
    out = []
    for i in range((figures + per_case - 1) // per_case):
        check = checks[i % len(checks)]
        figs = [Fig(f"bw_{2 ** k}B", "MB/s", "higher", 100.0 * (k + 1), 100.0 * (k + 1), -0.2,
                    0.2) for k in range(min(per_case, figures - i * per_case))]
        out.append(Case(check, {"size": str(i)}, figs))
    return out
