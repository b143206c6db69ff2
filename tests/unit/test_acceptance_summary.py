"""The acceptance run's summary table (bench/acceptance/summary.py) on recorded results.

``tests/data/acceptance/cpu-2core/`` is what ``acceptance.py run`` left on the
2-core development VM (no GPU; its README says when and under what load): the
summary must show its measured figures as its run reports hold them and every
GPU row as "not run: no GPU (reason)". A GPU run is then made from it with the
recorded GPU outputs of ``tests/data/gpu`` (an A100 node's ``nvidia-smi``
query, an A100 BabelStream run, an nccl-tests all-reduce): the GPU cases are
added to the recording run's report as ReFrame writes them, with figures the
project's own parsers read from those outputs, and the vet probe's line is
made by :func:`hpcval.vet.gpu_probe.measure` on the BabelStream output.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import stat
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hpcval.history.runreport import load_run_report
from hpcval.parsers import babelstream, nccl_tests
from hpcval.vet.gpu_probe import MARKER, measure

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
RECORDED = DATA / "acceptance" / "cpu-2core"
A100_CSV = DATA / "gpu" / "nvidia-smi-csv" / "a100-80gb-x8-memory-driver.csv"
A100_STREAM = DATA / "gpu" / "babelstream" / "a100-sxm4-80gb-cuda-v5.0.txt"
NCCL = DATA / "gpu" / "nccl-tests" / "all_reduce_perf-h100x16-2nodes.txt"


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"acceptance_{name}", ROOT / "bench" / "acceptance" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


summary = _module("summary")
acceptance = _module("acceptance")


def _rows(text: str) -> dict[str, list[str]]:
    """``what`` -> [part, what, figure, status] of the summary table."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 4 and cells[0] in ("setup", "memory", "I/O", "verdict", "GPU"):
            out[cells[1]] = cells
    return out


def _record_report(folder: Path) -> Path:
    res = summary.Results.load(folder)
    run = res.run_id("record")
    assert run is not None, "the recording step's log names its run"
    return folder / "store" / "acceptance" / "reports" / f"run-report-{run}.json"


def test_recorded_cpu_run_figures_and_gpu_rows_not_run(tmp_path: Path) -> None:
    folder = tmp_path / "cpu"
    shutil.copytree(RECORDED, folder)
    text = summary.write(folder).read_text()
    rows = _rows(text)
    report = load_run_report(_record_report(folder))
    stencil = next(c for c in report.cases if c.check == "cfdio_stencil_check")
    frac = next(p for p in stencil.perf if p.variable == "stencil_fraction_of_triad")
    row = rows["stencil / triad fraction, all cores"]
    assert row[2].startswith(f"{frac.value:.2f} (stencil ")
    assert row[3] == ("ok" if stencil.result == "pass" else row[3])
    assert "size " in row[2], "the size the check ran at is shown"
    # every GPU row says it did not run and why
    gpu = [r for r in rows.values() if r[0] == "GPU"]
    assert len(gpu) == 11
    assert {r[3] for r in gpu} == {"not run: no GPU (nvidia-smi not found on PATH)"}
    assert "Problem sizes" in text
    for what in ("venv from the carried folder", "5 clean IMB PingPong runs"):
        assert what in rows


def _testcase(check: str, perf: dict[str, tuple[float, str]], result: str = "pass",
              **extra: Any) -> dict[str, Any]:
    """One test case as ReFrame's JSON run report holds it."""
    return {"name": check, "unique_name": check, "display_name": f"{check} /0a1b2c3d",
            "system": "acceptance", "partition": "default", "environ": "plain",
            "result": result, "fail_phase": None if result == "pass" else "setup",
            "fail_reason": extra.pop("fail_reason", None),
            "perfvalues": {f"acceptance:default:{k}": [v, None, None, None, u, "pass"]
                           for k, (v, u) in perf.items()}, **extra}


@pytest.fixture
def gpu_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "gpu"
    shutil.copytree(RECORDED, folder)
    machine = json.loads((folder / "machine.json").read_text())
    machine["gpu"] = acceptance.gpu_facts(A100_CSV.read_text())
    machine.pop("gpu_reason", None)
    (folder / "machine.json").write_text(json.dumps(machine))
    triad = babelstream.check_complete(babelstream.parse_babelstream(
        A100_STREAM.read_text(), str(A100_STREAM))).rate("Triad")
    busbw = nccl_tests.check_complete(nccl_tests.parse_nccl_tests(
        NCCL.read_text(), str(NCCL)), 1 << 30).busbw(1 << 30)
    path = _record_report(folder)
    data = json.loads(path.read_text())
    data["runs"][-1]["testcases"] += [
        _testcase("babelstream_triad_check", {"triad": (triad, "MB/s")}),
        _testcase("nccl_allreduce_check", {"busbw_1GiB": (busbw, "GB/s")}),
        _testcase("gpubench_p2p_check", {}, result="skip",
                  skip_reason="partition acceptance:default: no peer access (constructed)"),
        _testcase("gpu_health_audit_check", {}, result="fail",
                  fail_reason="gpu.pcie_link_width: GPU 1 at x8, expected x16")]
    path.write_text(json.dumps(data))
    # the vet probe's line, made by the probe itself on the recorded BabelStream run
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "cuda-stream").write_text("#!/bin/sh\n")
    (bindir / "cuda-stream").chmod(stat.S_IRWXU)
    monkeypatch.setenv("HPCVAL_GPU_DIR", str(bindir))
    monkeypatch.setenv("PATH", "/nonexistent")
    probe = measure(1, 80 << 30, 2, run=lambda argv: A100_STREAM.read_text())
    (folder / "logs" / "vet_gpu_probe.log").write_text(
        "+ python -m hpcval.vet.gpu_probe\n" + MARKER + json.dumps({"gpus": 1, **probe}) + "\n")
    steps = json.loads((folder / "steps.json").read_text())
    for s in steps["steps"]:
        if s["name"] == "vet_gpu_probe":
            s.update(status="ok", exit_code=0, seconds=12.0, reason="",
                     log="logs/vet_gpu_probe.log")
    (folder / "steps.json").write_text(json.dumps(steps))
    return folder


def test_gpu_run_from_recorded_outputs(gpu_run: Path) -> None:
    text = summary.write(gpu_run).read_text()
    rows = _rows(text)
    assert "8x NVIDIA A100-SXM4-80GB (81920 MiB each, driver 570.133.20" in text
    # BabelStream triad 1,724,827 MB/s against the A100 80GB SXM4 datasheet's 2,039 GB/s
    assert rows["GPU memory triad (BabelStream) against the datasheet"][2:] == [
        "1,725 GB/s = 85% of 2,039 GB/s (A100-SXM4-80GB datasheet)", "ok"]
    # nccl-tests' out-of-place bus bandwidth at 1 GiB, as recorded: 297.86 GB/s
    assert rows["NCCL all-reduce bus bandwidth, 1 GiB"][2:] == ["busbw_1GiB 298 GB/s", "ok"]
    assert rows["GPU-to-GPU copies (gpubench)"][3] == (
        "not run: partition acceptance:default: no peer access (constructed)")
    assert rows["GPU health audit (ReFrame check)"][3] == (
        "failed: gpu.pcie_link_width: GPU 1 at x8, expected x16")
    probe = rows["`hpcval vet`'s GPU probe on the node"]
    assert probe[2].startswith("gpu_triad_bw GPU0 1,724,827")
    assert "gpubench not found" in probe[2] and probe[3] == "ok"
    # a GPU part with no case in the report says why: the recording step's state
    assert rows["GEMM (gpubench, cuBLAS)"][3] == "not run: no case of it in the run report"


def test_datasheet_matches_longest_name_first() -> None:
    assert summary.datasheet("NVIDIA H100 80GB HBM3") == ("H100 80GB HBM3", 3350.0)
    assert summary.datasheet("NVIDIA H100 PCIe") == ("H100 PCIe", 2000.0)
    assert summary.datasheet("NVIDIA H200") == ("H200", 4800.0)
    assert summary.datasheet("NVIDIA GeForce RTX 4070") is None


def test_gpu_facts_reads_any_recorded_query() -> None:
    h200 = acceptance.gpu_facts((DATA / "gpu" / "nvidia-smi-csv" / "h200-x4-memory.csv")
                                .read_text())
    assert [g["index"] for g in h200] == ["0", "1", "2", "3"]
    assert h200[0]["name"] == "NVIDIA H200" and h200[0]["memory.total"] == "143771 MiB"
    assert acceptance.gpu_facts("") == []


def test_dry_run_writes_every_row_with_its_reason(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", os.environ["PATH"])  # run adds the GPU tool folders to it
    out = tmp_path / "dry"
    assert acceptance.main(["run", "--dry", "--out", str(out), "--work",
                            str(tmp_path / "work")]) == 0
    rows = _rows((out / "summary.md").read_text())
    assert rows["stencil / triad fraction, all cores"][3] == "not run: --dry: not run"
    assert rows["venv from the carried folder"][3] == "not run: --dry: not run"
    steps = json.loads((out / "steps.json").read_text())["steps"]
    record = next(s for s in steps if s["name"] == "record")
    assert "--record" in record["command"] and "--budget" in record["command"]


def test_summary_refuses_a_missing_folder(tmp_path: Path) -> None:
    assert summary.main([str(tmp_path / "nothing")]) == 2


def test_contended_row_prints_each_outcome_with_its_change(tmp_path: Path) -> None:
    """The recorded run stopped before its contended run: one is made from its
    PingPong recording run, with verdicts constructed in the stored shape."""
    from hpcval.history.judging.change import Change

    folder = tmp_path / "contended"
    shutil.copytree(RECORDED, folder)
    res = summary.Results.load(folder)
    run = res.run_id("verdict_record")
    assert run is not None
    case = next(c for c in res.reports[run].cases if c.check == "imb_pingpong_check")
    key = f"{case.display_name}@{case.system}:{case.partition}+{case.environ}"
    detail = {"change": 1.5, "ci_low": 1.2, "ci_high": 1.9, "ci_level": 0.95, "unit": "us"}
    verdicts = folder / "store" / "acceptance-verdict" / "verdicts" / f"{run}.json"
    verdicts.write_text(json.dumps({"result": "regressed", "accepted": False, "verdicts": [
        [key, "lat_0B", "regressed", detail], [key, "bw_1MiB", "pass", {"change": 0.01}]]}))
    (folder / "logs" / "pingpong_contended.log").write_text(
        (folder / "logs" / "verdict_record.log").read_text())
    steps = json.loads((folder / "steps.json").read_text())
    for s in steps["steps"]:
        if s["name"] == "pingpong_contended":
            s.update(status="failed (exit 1)", exit_code=1, seconds=30.0, reason="",
                     log="logs/pingpong_contended.log", extra={"busy_loops": 4})
    (folder / "steps.json").write_text(json.dumps(steps))
    row = _rows(summary.write(folder).read_text())[
        "PingPong beside 4 busy loops (2 per core): what is called"]
    lat = next(p for p in case.perf if p.variable == "lat_0B")
    assert row[2].startswith("run regressed, exit 1: ")
    assert f"lat_0B regressed {Change(1.5, 1.2, 1.9, 0.95).text()} (- -> " in row[2]
    assert f"-> {summary.num(lat.value)}, band {lat.result})" in row[2]
    assert "bw_1MiB pass (" in row[2] and row[3] == "ok"


def test_busy_loops_run_until_their_group_is_killed() -> None:
    import os
    import signal

    hogs = acceptance.busy_loops(2)
    try:
        assert all(h.poll() is None for h in hogs), "the loops keep running"
    finally:
        for h in hogs:
            os.killpg(h.pid, signal.SIGKILL)
    assert [h.wait(timeout=10) for h in hogs] == [-signal.SIGKILL] * 2


@pytest.mark.parametrize(("codes", "status"), [
    ([0, 0, 1, 0, 0], "ok"),  # exit 1: a figure was called regressed, a result
    ([0, 0, 2, 0, 0], "failed: a run exited with 2"),
])
def test_clean_runs_status_from_exit_codes(tmp_path: Path, codes: list[int],
                                           status: str) -> None:
    folder = tmp_path / "clean"
    shutil.copytree(RECORDED, folder)
    steps = json.loads((folder / "steps.json").read_text())
    for s in steps["steps"]:
        if s["name"].startswith("pingpong_clean_"):
            code = codes[int(s["name"].rsplit("_", 1)[1]) - 1]
            s.update(status="ok" if code == 0 else f"failed (exit {code})", exit_code=code,
                     seconds=20.0, reason="")
    (folder / "steps.json").write_text(json.dumps(steps))
    row = _rows(summary.write(folder).read_text())["5 clean IMB PingPong runs"]
    assert row[2].startswith(f"5 of 5 runs, exit codes {', '.join(map(str, codes))}")
    assert row[3] == status


def test_parts_select_what_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", os.environ["PATH"])
    out = tmp_path / "dry"
    assert acceptance.main(["run", "--dry", "--parts", "verdict", "--out", str(out),
                            "--work", str(tmp_path / "work")]) == 0
    steps = {s["name"]: s for s in json.loads((out / "steps.json").read_text())["steps"]}
    assert steps["record"]["reason"] == "not asked for (--parts)"
    assert steps["pingpong_contended"]["reason"] == "--dry: not run"
    assert acceptance.main(["run", "--dry", "--parts", "verdicts", "--out", str(out)]) == 2


def test_recorded_verdict_experiment(tmp_path: Path) -> None:
    """``verdict-2core/``: the verdict experiment run to its end on the 2-core VM
    (``--parts verdict``): the contended run's row shows each stored verdict with
    the change ``Change.from_detail`` makes of it, beside the band result."""
    from hpcval.history.judging.change import Change

    folder = tmp_path / "verdict"
    shutil.copytree(DATA / "acceptance" / "verdict-2core", folder)
    res = summary.Results.load(folder)
    run = res.run_id("pingpong_contended")
    assert run is not None
    stored = {v[1]: v for v in res.verdicts[run]["verdicts"]}
    rows = _rows(summary.write(folder).read_text())
    assert rows["5 clean IMB PingPong runs"][3] == "ok"
    row = rows["PingPong beside 4 busy loops (2 per core): what is called"]
    _key, _var, outcome, detail = stored["lat_0B"]
    assert f"lat_0B {outcome} {Change.from_detail(detail).text()} (" in row[2]
    case = next(c for c in res.reports[run].cases if c.check == "imb_pingpong_check")
    band = next(p.result for p in case.perf if p.variable == "lat_0B")
    assert f"band {band})" in row[2] and row[3] == "ok"
    assert rows["stencil / triad fraction, all cores"][3] == "not run: not asked for (--parts)"
