"""What a benchmark prints reaches the terminal and the run's log bounded,
and is kept whole where ReFrame keeps it: a benchmark that printed one line
of 80 MB sent 70 MB and more to the terminal (ReFrame quotes the last ten
lines of a failed job's output), and as much to ``var/<site>/logs/<run>.out``
(:mod:`hpcval.run.outputlines`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcval.run.outputlines import MAX_LINE_CHARS

from .conftest import TRACEBACK, make_checkout, needs_impi, run

pytestmark = pytest.mark.integration

#: One line of LINE_BYTES, to the job's stdout or stderr (its first argument).
LONG_LINE = """#!/bin/sh
rank=${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-0}}
[ "$rank" != 0 ] && exit 0
if [ "$1" = err ]; then head -c %d /dev/zero | tr '\\0' x >&2; echo >&2; exit 1; fi
head -c %d /dev/zero | tr '\\0' x; echo
"""
LINE_BYTES = 20_000_000

CHECK = '''
from pathlib import Path

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from hpcval.rfm.imb import ImbPingPongBase


@rfm.simple_test
class fake_long_line_check(ImbPingPongBase):
    """IMB PingPong as judged on the local site; the benchmark prints one
    long line to its stdout or its stderr instead of a table."""

    reference_entry = "imb_pingpong_check"
    program = str(Path(__file__).resolve().parent / "long-line")
    samples = 2
    cache = parameter(inherit_params=True, filter_params=lambda values: values[:1])
    stream = parameter(["out", "err"])
    valid_systems = ["local"]
    valid_prog_environs = ["+mpi +imb"]
    time_limit = "120s"

    @run_after("setup")
    def print_long_line(self) -> None:
        self.executable_opts = [self.stream, *self.executable_opts]
'''


def test_a_long_line_reaches_the_terminal_bounded(tmp_path: Path) -> None:
    needs_impi()
    root = make_checkout(tmp_path)
    checks = tmp_path / "checks"
    checks.mkdir()
    program = checks / "long-line"
    program.write_text(LONG_LINE % (LINE_BYTES, LINE_BYTES))
    program.chmod(0o755)
    (checks / "long_line_checks.py").write_text(CHECK)
    res = run(root, "validate", "--site", "local", "--", "-c", str(checks),
              "-n", "fake_long_line_check")
    assert res.returncode == 1, res.output[-3000:]
    assert TRACEBACK not in res.output
    # ReFrame quotes each job's last lines: twice the line, were it not bounded
    assert len(res.output) < 200_000, f"{len(res.output)} characters reached the terminal"
    assert max(len(ln) for ln in res.output.splitlines()) < MAX_LINE_CHARS + 200
    assert "more characters of this line cut here" in res.stdout
    var = root / "var" / "local"
    (log,) = [p for p in (var / "logs").glob("*.out")]
    assert log.stat().st_size < 200_000, f"the run's log holds {log.stat().st_size} bytes"
    # kept whole where ReFrame keeps it
    for name in ("rfm_job.out", "rfm_job.err"):
        sizes = [p.stat().st_size for p in (var / "stage").rglob(name)]
        assert max(sizes, default=0) > LINE_BYTES, (name, sizes)
    (report,) = (var / "reports").glob("run-report-*.json")
    cases = json.loads(report.read_text())["runs"][-1]["testcases"]
    assert {c["result"] for c in cases} == {"fail"}
    assert all(len(c["fail_reason"] or "") < 20_000 for c in cases), \
        [len(c["fail_reason"] or "") for c in cases]
    assert all(p.stat().st_size < 200_000 for p in (var / "html").glob("*.html"))
