"""`hpcval report`'s exit code is its verdict's: a run whose cases all
passed their bands but whose figure regressed against its history printed
`RESULT: FAIL ... 1 regressed` and exited 0 (only failed cases counted).
The history is made by hpcval's own storing and judging (tests/history_maker.py)."""

from __future__ import annotations

from pathlib import Path

from history_maker import Change, make_history

from .conftest import TRACEBACK, run


def test_report_of_a_regressed_run_exits_1(tmp_path: Path) -> None:
    # PingPong's band is the local site's loose floor: 40 % less bandwidth stays in it
    hist = make_history(tmp_path, runs=8, last=[Change("imb_pingpong_check", "bw_1MiB", 0.6)])
    res = run(hist.site.root, "report", "--site", "demo", hist.run_ids[-1])
    assert res.stdout.startswith("RESULT: FAIL  0 failed, 1 regressed"), res.output
    assert res.returncode == 1 and TRACEBACK not in res.output
    res = run(hist.site.root, "report", "--site", "demo", hist.run_ids[-2])
    assert res.stdout.startswith("RESULT: PASS") and res.returncode == 0, res.output
