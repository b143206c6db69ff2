"""The summary table of an acceptance run, in Markdown (docs/performance.md).

``python bench/acceptance/summary.py DIR`` reads what ``acceptance.py run``
left in DIR (``machine.json``, ``steps.json``, the logs, the site's store under
``store/``: run reports and verdicts) and writes ``DIR/summary.md``; it prints
the table too. Every row says what was measured, the figure, and ``ok``,
``failed: why`` or ``not run: why``: a part that did not run is never left out.

It reads hpcval's run reports with :func:`hpcval.history.runreport.load_run_report`
and prints changes with :class:`hpcval.history.judging.change.Change`, so its numbers
are the ones ``hpcval report`` and ``hpcval history`` print. hpcval is imported
only where there is a store to read: the summary of a ``--dry`` run or of a
failed install needs the standard library alone.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: GPU memory bandwidth from NVIDIA's datasheets (GB/s, 10^9 bytes/s), matched
#: against the ``nvidia-smi`` name, longest first. A100/H100/H200: "NVIDIA A100
#: Tensor Core GPU", "NVIDIA H100 Tensor Core GPU", "NVIDIA H200 Tensor Core GPU"
#: datasheets; V100: "NVIDIA Tesla V100 GPU Accelerator"; L40S: "NVIDIA L40S".
DATASHEET_GBS: dict[str, float] = {
    "H200": 4800.0,
    "H100 NVL": 3900.0,
    "H100 PCIe": 2000.0,
    "H100 80GB HBM3": 3350.0,  # H100 SXM5
    "A100-SXM4-80GB": 2039.0,
    "A100 80GB PCIe": 1935.0,
    "A100-SXM4-40GB": 1555.0,
    "A100-PCIE-40GB": 1555.0,
    "V100": 900.0,
    "L40S": 864.0,
}

RUN_LINE = re.compile(r"hpcval: run (\S+) on site ")
VET_MARKER = "HPCVAL-VET-GPU "
QUIET = {"pass", "no-baseline"}


def datasheet(name: str) -> tuple[str, float] | None:
    """(matched key, GB/s) of a GPU model name, or None."""
    for key in sorted(DATASHEET_GBS, key=len, reverse=True):
        if key.lower() in name.lower():
            return key, DATASHEET_GBS[key]
    return None


def num(v: float | None, unit: str = "") -> str:
    if v is None:
        return "-"
    text = f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return f"{text} {unit}".strip()


@dataclass
class Row:
    part: str
    what: str
    value: str
    status: str


@dataclass
class Results:
    """What one acceptance run left in its folder."""

    dir: Path
    machine: dict[str, Any]
    steps: dict[str, dict[str, Any]]
    budget_s: float | None = None
    elapsed_s: float | None = None
    reports: dict[str, Any] = field(default_factory=dict)   # run id -> RunReport
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)  # run id -> file

    @classmethod
    def load(cls, folder: Path) -> Results:
        machine = _json(folder / "machine.json") or {}
        data = _json(folder / "steps.json") or {}
        steps = {s["name"]: s for s in data.get("steps", [])}
        res = cls(folder, machine, steps, data.get("budget_s"), data.get("elapsed_s"))
        # store/<site>/: one results store per site of the run
        paths = sorted((folder / "store").glob("*/reports/run-report-*.json"))
        if paths:
            from hpcval.core.errors import HpcvalError
            from hpcval.history.runreport import load_run_report

            for path in paths:
                run_id = path.stem.removeprefix("run-report-")
                try:
                    res.reports[run_id] = load_run_report(path)
                except HpcvalError:
                    continue
                v = _json(path.parent.parent / "verdicts" / f"{run_id}.json")
                if v is not None:
                    res.verdicts[run_id] = v
        return res

    def run_id(self, step: str) -> str | None:
        """The hpcval run id a validate step printed."""
        s = self.steps.get(step)
        if not s or not s.get("log"):
            return None
        try:
            text = (self.dir / s["log"]).read_text(errors="replace")
        except OSError:
            return None
        m = RUN_LINE.search(text)
        return m.group(1) if m else None

    def cases(self, step: str, check: str) -> list[Any]:
        run = self.run_id(step)
        report = self.reports.get(run or "")
        return [c for c in report.cases if c.check == check] if report else []

    def not_run(self, step: str) -> str:
        """Why *step* gave nothing: its reason, its status, or that it is missing."""
        s = self.steps.get(step)
        if s is None:
            return "not run: no such step recorded"
        if s.get("status") == "not run":
            return f"not run: {s.get('reason') or 'no reason recorded'}"
        where = f"{s['status']}: {s.get('reason') or 'see ' + str(s.get('log'))}"
        if s.get("status") == "ok":
            return "not run: no case of it in the run report"
        if s.get("status") == "stopped at the budget":
            return where
        return f"not run: no case of it in the run report ({s['name']} {where})"

    def gpu_reason(self) -> str | None:
        """Why no GPU part can run here, or None where the node has GPUs."""
        if self.machine.get("gpu"):
            return None
        return f"not run: no GPU ({self.machine.get('gpu_reason') or 'nvidia-smi lists none'})"


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _perf(case: Any, var: str) -> Any:
    return next((p for p in case.perf if p.variable == var), None)


def _case_status(case: Any) -> str:
    if case.result == "pass":
        return "ok"
    if case.skipped:
        from hpcval.history.runreport import skip_reason

        return f"not run: {skip_reason(case)}"
    reason = (case.fail_reason or "no reason given").splitlines()[0][:200]
    # a case whose build (a fixture) failed says so itself: "not run: what it needs..."
    return reason if reason.startswith("not run") else f"failed: {reason}"


def _size(case: Any) -> str:
    size = str(case.raw.get("problem_size") or "")
    return f"; size {size}" if size else ""


def machine_line(res: Results) -> str:
    m = res.machine
    gpus = m.get("gpu")
    if gpus:
        names = Counter(g["name"] for g in gpus)
        gpu = ", ".join(f"{n}x {name}" for name, n in names.items())
        gpu += (f" ({gpus[0].get('memory.total', '?')} each, driver "
                f"{gpus[0].get('driver_version', '?')}, compute capability "
                f"{gpus[0].get('compute_cap', '?')})")
    else:
        gpu = f"none ({m.get('gpu_reason', 'nvidia-smi lists none')})"
    took = f"{res.elapsed_s:.0f} s of a {res.budget_s:.0f} s budget" \
        if res.elapsed_s is not None and res.budget_s else "?"
    return (f"{m.get('host', '?')}, {m.get('date', '?')}: {m.get('model_name', '?')}, "
            f"{m.get('cores', '?')} cores, {m.get('memory_gib', '?')} GiB, L3 "
            f"{m.get('l3_cache', '?')}; GPU: {gpu}; nvcc: "
            f"{' '.join(m.get('nvcc_version') or []) or m.get('nvcc') or 'none'}; "
            f"load average {m.get('loadavg', 0):.2f} at the start, "
            f"{m.get('loadavg_end', 0):.2f} at the end; took {took}")


def _step_row(res: Results, part: str, name: str, what: str, value: str = "") -> Row:
    s = res.steps.get(name)
    if s is None:
        return Row(part, what, "-", "not run: no such step recorded")
    if s.get("status") == "ok":
        secs = f"{s['seconds']:.0f} s" if s.get("seconds") is not None else ""
        return Row(part, what, ", ".join(x for x in (value, secs) if x) or "-", "ok")
    return Row(part, what, value or "-", res.not_run(name))


def install_rows(res: Results) -> list[Row]:
    s = res.steps.get("install", {})
    extra = s.get("extra") or {}
    value = (f"{len(extra.get('wheels_installed', []))} wheels installed, Intel MPI "
             f"{extra.get('intel_mpi', '?')} subset, mpirun "
             f"{'works' if extra.get('mpirun_ok') else 'FAILED'}") \
        if "wheels_installed" in extra else ""
    rows = [_step_row(res, "setup", "install", "venv from the carried folder", value)]
    config = res.dir / "site" / "acceptance.config.py"
    site_value = ""
    if config.is_file():
        text = config.read_text()
        site_value = "GPU partition (`gpu` feature)" if '"gpu"' in text else \
            "CPU partition (no GPU found)"
    rows.append(_step_row(res, "setup", "site", "`hpcval site new` (node topology, "
                          "nvidia-smi)", site_value))
    return rows


def memory_io_rows(res: Results) -> list[Row]:
    rows = []
    step = "record"
    for check, what, show in (
            ("cfdio_stencil_check", "stencil / triad fraction, all cores", _stencil),
            ("cfdio_triad_check", "triad bandwidth, all cores", _triad),
            ("cfdio_output_cost_check", "output cost (with - without output)", _output),
            ("cfdio_read_check", "read-back of result files", _read)):
        cases = res.cases(step, check)
        if not cases:
            part = "memory" if "stencil" in check or "triad" in check else "I/O"
            rows.append(Row(part, what, "-", res.not_run(step)))
            continue
        rows += show(cases, what)
    return rows


def _stencil(cases: list[Any], what: str) -> list[Row]:
    out = []
    for c in cases:
        frac, st, tr = (_perf(c, v) for v in ("stencil_fraction_of_triad", "stencil_bw",
                                                "triad_bw"))
        value = (f"{frac.value:.2f} (stencil {num(st and st.value, 'MB/s')}, triad "
                 f"{num(tr and tr.value, 'MB/s')}){_size(c)}") if frac else "-"
        out.append(Row("memory", what, value, _case_status(c)))
    return out


def _triad(cases: list[Any], what: str) -> list[Row]:
    out = []
    for c in cases:
        p = _perf(c, "triad_bw")
        out.append(Row("memory", what, f"{num(p and p.value, 'MB/s')}{_size(c)}",
                       _case_status(c)))
    return out


def _output(cases: list[Any], what: str) -> list[Row]:
    out = []
    for c in sorted(cases, key=lambda c: c.display_name):
        cost, share = _perf(c, "output_cost"), _perf(c, "output_share")
        strategy = str(c.raw.get("strategy") or c.display_name)
        ranks = c.raw.get("ranks", "?")
        value = (f"{cost.value:.3f} s" if cost and cost.value is not None else "-") + (
            f" ({share.value:.0%} of the run)" if share and share.value is not None else "")
        out.append(Row("I/O", f"{what}: {strategy}, {ranks} ranks", value + _size(c),
                       _case_status(c)))
    return out


def _read(cases: list[Any], what: str) -> list[Row]:
    out = []
    for c in cases:
        agg, lo, hi, cached = (_perf(c, v) for v in ("aggregate_read_bw", "min_reader_bw",
                                                      "max_reader_bw", "cache_resident"))
        readers = c.raw.get("readers", "?")
        value = (f"{num(agg.value, 'MB/s')} aggregate, per reader "
                 f"{num(lo and lo.value)}-{num(hi and hi.value, 'MB/s')}, in page cache "
                 f"{num(cached and cached.value)}{_size(c)}") \
            if agg is not None and agg.value is not None else "-"
        out.append(Row("I/O", f"{what}, {readers} readers", value, _case_status(c)))
    return out


def size_rows(res: Results) -> list[tuple[str, str, str]]:
    """(case, size, reason) of every sized case of the recording run."""
    run = res.run_id("record")
    report = res.reports.get(run or "")
    if report is None:
        return []
    from hpcval.reporting.sizereport import case_sizes

    return [(c.display_name, size, reason) for c, size, reason in case_sizes(report.cases)]


def verdict_rows(res: Results) -> list[Row]:
    from_clean = [f"pingpong_clean_{i}" for i in range(1, 6)]
    outcomes: Counter[str] = Counter()
    codes = []
    clean_values: dict[str, list[float]] = {}
    for name in from_clean:
        s = res.steps.get(name)
        if s is None or s.get("status") == "not run":
            continue
        codes.append(str(s.get("exit_code")))
        run = res.run_id(name)
        for v in (res.verdicts.get(run or "") or {}).get("verdicts", []):
            outcomes[v[2]] += 1
        for c in res.cases(name, "imb_pingpong_check"):
            for p in c.perf:
                if p.value is not None:
                    clean_values.setdefault(p.variable, []).append(p.value)
    rows = [_step_row(res, "verdict", "verdict_record", "PingPong recording run (the verdict "
                      "site's references)")]
    if codes:
        value = (f"{len(codes)} of 5 runs, exit codes {', '.join(codes)}; outcomes: "
                 + (", ".join(f"{k} {n}" for k, n in sorted(outcomes.items())) or "none"))
        # exit 1 is a verdict (a figure called regressed or out of its band): a
        # result of the experiment, shown in the outcomes; 2, 3 or a stop are not
        judged = all(c in ("0", "1") for c in codes)
        if len(codes) == 5 and judged:
            status = "ok"
        elif len(codes) == 5:
            status = "failed: a run exited with " + ", ".join(c for c in codes
                                                             if c not in ("0", "1"))
        else:
            status = (f"incomplete: {len(codes)} of 5 started; "
                      f"{res.not_run(from_clean[len(codes)])}")
        rows.append(Row("verdict", "5 clean IMB PingPong runs", value, status))
    else:
        rows.append(Row("verdict", "5 clean IMB PingPong runs", "-", res.not_run(from_clean[0])))
    rows.append(_contended_row(res, clean_values))
    return rows


def _contended_row(res: Results, clean: dict[str, list[float]]) -> Row:
    name = "pingpong_contended"
    s = res.steps.get(name) or {}
    loops = (s.get("extra") or {}).get("busy_loops")
    what = (f"PingPong beside {loops} busy loops (2 per core): what is called" if loops
            else "PingPong beside 2 busy loops per core: what is called")
    run = res.run_id(name)
    if run is None or run not in res.reports:
        return Row("verdict", what, "-", res.not_run(name))
    from hpcval.history.judging.change import Change

    called = []
    verdicts = (res.verdicts.get(run) or {}).get("verdicts", [])
    bands = {p.variable: p.result for c in res.cases(name, "imb_pingpong_check") for p in c.perf}
    values = {p.variable: p.value for c in res.cases(name, "imb_pingpong_check")
              for p in c.perf}
    for _key, var, outcome, detail in verdicts:
        change = Change.from_detail(detail) if isinstance(detail, dict) else None
        before = statistics.median(clean[var]) if clean.get(var) else None
        moved = f" {change.text()}" if change is not None and outcome not in QUIET else ""
        called.append(f"{var} {outcome}{moved} ({num(before)} -> {num(values.get(var))}, "
                      f"band {bands.get(var, '?')})")
    result = (res.verdicts.get(run) or {}).get("result", "?")
    value = (f"run {result}, exit {s.get('exit_code')}: " + "; ".join(called)) if called \
        else f"exit {s.get('exit_code')}: no verdict stored"
    return Row("verdict", what, value, "ok" if called else res.not_run(name))


def gpu_rows(res: Results) -> list[Row]:
    no_gpu = res.gpu_reason()
    rows = [_gpu_case_row(res, "babelstream_triad_check", "GPU memory triad (BabelStream) "
                          "against the datasheet", _triad_value, no_gpu),
            _gpu_case_row(res, "nccl_allreduce_check", "NCCL all-reduce bus bandwidth, 1 GiB",
                          lambda c, r: _perf_list(c, "busbw_1GiB"), no_gpu),
            _gpu_case_row(res, "gpubench_copy_check", "host-device copies, pinned (gpubench)",
                          lambda c, r: _perf_list(c, "h2d_bw", "d2h_bw"), no_gpu),
            _gpu_case_row(res, "gpubench_gemm_check", "GEMM (gpubench, cuBLAS)",
                          lambda c, r: _perf_list(c, "dgemm", "sgemm"), no_gpu),
            _gpu_case_row(res, "gpubench_p2p_check", "GPU-to-GPU copies (gpubench)",
                          lambda c, r: _perf_list(c, "p2p_bw"), no_gpu),
            _gpu_case_row(res, "imb_gpu_pingpong_check", "IMB-MPI1-GPU PingPong, device "
                          "buffers", lambda c, r: _perf_list(c, "lat_0B", "bw_1MiB"), no_gpu),
            _gpu_case_row(res, "gpu_health_audit_check", "GPU health audit (ReFrame check)",
                          lambda c, r: "", no_gpu)]
    for name, what, value in (("gpu_build", "gpubench built with the machine's nvcc", ""),
                              ("gpu_audit", "GPU health audit, `python -m hpcval.node.gpu_audit`",
                               ""),
                              ("vet_gpu_probe", "`hpcval vet`'s GPU probe on the node",
                               _vet_probe(res)),
                              ("vet", "`hpcval vet --site`", _last_line(res, "vet"))):
        row = _step_row(res, "GPU", name, what, value)
        if no_gpu and row.status.startswith("not run"):
            row.status = no_gpu
        rows.append(row)
    return rows


def _gpu_case_row(res: Results, check: str, what: str, show: Any, no_gpu: str | None) -> Row:
    cases = res.cases("record", check)
    if not cases:
        return Row("GPU", what, "-", no_gpu or res.not_run("record"))
    c = cases[0]
    return Row("GPU", what, show(c, res) or "-", _case_status(c))


def _perf_list(case: Any, *names: str) -> str:
    return ", ".join(f"{p.variable} {num(p.value, p.unit)}" for p in case.perf
                     if p.variable in names)


def _triad_value(case: Any, res: Results) -> str:
    p = _perf(case, "triad")
    if p is None or p.value is None:
        return ""
    gpus = res.machine.get("gpu") or []
    sheet = datasheet(gpus[0]["name"]) if gpus else None
    gbs = p.value / 1000.0
    if sheet is None:
        return f"{gbs:,.0f} GB/s (no datasheet figure known for this model)"
    return f"{gbs:,.0f} GB/s = {gbs / sheet[1]:.0%} of {sheet[1]:,.0f} GB/s ({sheet[0]} datasheet)"


def _vet_probe(res: Results) -> str:
    s = res.steps.get("vet_gpu_probe")
    if not s or not s.get("log"):
        return ""
    try:
        text = (res.dir / s["log"]).read_text(errors="replace")
    except OSError:
        return ""
    line = next((ln for ln in text.splitlines() if ln.startswith(VET_MARKER)), None)
    if line is None:
        return ""
    data = json.loads(line[len(VET_MARKER):])
    parts = [f"{fig} GPU{gpu} {num(statistics.median(vals))}"
             for fig, by_gpu in sorted(data.get("figures", {}).items())
             for gpu, vals in sorted(by_gpu.items()) if vals]
    skipped = "; ".join(data.get("skipped", []))
    return "; ".join(parts) + (f" (not measured: {skipped})" if skipped else "")


def _last_line(res: Results, name: str) -> str:
    s = res.steps.get(name)
    if not s or not s.get("log") or s.get("status") == "not run":
        return ""
    try:
        lines = [ln for ln in (res.dir / s["log"]).read_text(errors="replace").splitlines()
                 if ln.strip() and not ln.startswith("+ ")]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def rows(res: Results) -> list[Row]:
    return install_rows(res) + memory_io_rows(res) + verdict_rows(res) + gpu_rows(res)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(res: Results) -> str:
    lines = ["# Acceptance run", "", machine_line(res), "",
             "| part | what | figure | status |", "|---|---|---|---|"]
    lines += [f"| {r.part} | {_cell(r.what)} | {_cell(r.value)} | {_cell(r.status)} |"
              for r in rows(res)]
    sizes = size_rows(res)
    if sizes:
        lines += ["", "Problem sizes (`--budget quick`) and why:", "",
                  "| case | size | reason |", "|---|---|---|"]
        lines += [f"| {_cell(c)} | {_cell(s)} | {_cell(r)} |" for c, s, r in sizes]
    return "\n".join(lines) + "\n"


def write(folder: Path) -> Path:
    """Write ``folder/summary.md``; returns its path."""
    text = markdown(Results.load(folder))
    path = folder / "summary.md"
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print("usage: summary.py RESULTS_DIR (the --out of acceptance.py run); exit 2",
              file=sys.stderr)
        return 2
    path = write(Path(args[0]))
    print(path.read_text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
