"""History verdicts for real on the `local` site: a history of clean runs, a
clean repeat judged against it, then a run made worse on purpose (Intel MPI
forced onto TCP over loopback instead of shared memory: a real path, 8-byte
latency about 25 times longer). The clean repeat is not `regressed`; the slow
run is, exits 1, names the check, the figure, the medians, the change with its
interval and the p-value, and stays out of later baselines.

The settings are the defaults (K = 5 baseline runs, alpha 0.05, Holm) with a
practical threshold of 50 %, and 95 % for bandwidth: on a shared 2-core VM,
IMB's 1-4 MiB shared-memory bandwidth is bimodal between launches (some run at
~25 GB/s, others at ~2 GB/s, as slow as TCP: docs/judging.md, "The local
site"), so a clean run can really be ten times slower there, and bandwidth
cannot tell the degraded path from an unlucky launch. The statistics
themselves are tested on seeded samples in tests/unit/test_judging.py, their
false-alarm and miss rates measured on the lab (docs/judging.md).

A second test keeps the default settings (5 % threshold, K = 5) and makes the
machine busy instead: two busy loops per core beside the run. The ranks then
get a fraction of a core each and are descheduled in the middle of messages, so
latency grows and every figure's samples scatter: the run is `regressed` or
`unstable` on latency and on 1 MiB bandwidth, and a clean repeat
before it prints no per-figure line (what a person reads on a clean run:
docs/judging.md)."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hpcval.history.store import Store
from hpcval.rfm.site import intel_mpi_from_pypi

from .conftest import HpcvalRunner

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(intel_mpi_from_pypi() is None,
                       reason="Intel MPI from PyPI (impi-rt, impi-devel) is not installed in "
                              "this Python environment: run `make setup`"),
]

WARM = ["-n", "imb_pingpong_check%cache=warm", "-S", "repetitions=100"]
#: a slower path that is really there: TCP over loopback instead of shared memory
DEGRADED = {"I_MPI_FABRICS": "ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "lo"}
K = 5
#: a per-figure history line (docs/judging.md, "What a person reads"):
#: OUTCOME <check> %<param>=<value>@<system>:<partition>+<environ> <figure>: <message>
VERDICT = re.compile(r"^(REGRESSED|UNSTABLE|IMPROVED) (\S+ %\S+)@(\S+) (\w+): (.*)$",
                     re.MULTILINE)
#: the message of a regressed figure: before -> now, the change with its interval
#: at the decision's level, the family (when judged in one) and p
MESSAGE = re.compile(r"[\d.,]+ -> [\d.,]+ (MB/s|us), (?P<change>[-+][\d.,]+) % "
                     r"\[[-+][\d.,]+ \.\. [-+][\d.,]+\] \([\d.]+ %\)"
                     r"(, family \w+)?, p=[\d.e-]+")
BUSY_PER_CORE = 2
#: load average per core above which the machine is not idle enough for clean runs
IDLE_LOAD = 0.5
#: the most the clean runs' medians of a figure may differ (highest / lowest) for a
#: busy run to be told from them: the 16-core server's busy run cost bw_4MiB 48 %
#: (a factor of 1.9) and multiplied lat_0B by 146
CLEAN_RANGE = 2.0
#: the most the samples of one clean run may scatter ((max - min) / median, the
#: median over the clean runs): PingPong on a dedicated core repeats within a few %
CLEAN_SCATTER = 0.5


def _num(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _verdicts(out: str) -> list[tuple[str, str, str, str]]:
    """(outcome, check, figure, message) of every per-figure verdict line printed."""
    return [(m[1], m[2], m[4], m[5]) for m in VERDICT.finditer(out)]


def _no_bands(checkout: Path, check: str) -> None:
    """Leave ``check``'s figures without reference bounds in the checkout's copy of
    the local references: its bands are the site's contract (a loaded machine
    breaks the local 100 us latency ceiling), the subject here is the history."""
    ref = checkout / "site-configs" / "local" / "references.yaml"
    head, sep, rest = ref.read_text().partition(f"\n{check}:\n")
    assert sep, f"{ref}: no {check}"
    block, nxt = re.split(r"\n(?=\S)", rest, maxsplit=1)
    block = re.sub(r"\[([\d.]+), ([\d.-]+|null), ([\d.-]+|null), ",
                   r"[\1, null, null, ", block)
    ref.write_text(head + sep + block + "\n" + nxt)


@contextmanager
def _busy_loops(count: int) -> Iterator[None]:
    """``count`` processes that spin on the CPU while the block runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def test_regression_against_history(checkout: Path, hpcval: HpcvalRunner):
    site = checkout / "site-configs" / "local"
    # hold_factor 0: the subject is the regressed run; on a loaded machine a clean
    # repeat's latency may move 2x and be held (tests/unit/test_verdicts.py)
    (site / "judging.yaml").write_text(
        f"k: {K}\nthreshold: 50%\nhold_factor: 0\nfigures:\n  '*/bw_*': {{threshold: 95%}}\n")
    for _ in range(K):
        clean = hpcval(checkout, "validate", "--site", "local", "--", *WARM)
        assert clean.returncode == 0, clean.stdout + clean.stderr
        # fewer than K accepted runs before it: no baseline, never a pass
        assert "no-baseline" in clean.stdout, clean.stdout
        assert not _verdicts(clean.stdout), clean.stdout

    repeat = hpcval(checkout, "validate", "--site", "local", "--", *WARM)
    out = repeat.stdout + repeat.stderr
    assert "no-baseline" not in repeat.stdout, out
    assert not [v for v in _verdicts(out) if v[0] == "REGRESSED"], out
    assert repeat.returncode == 0, out

    slow = hpcval(checkout, "validate", "--site", "local", "--", *WARM,
                  env={**os.environ, **DEGRADED})
    out = slow.stdout + slow.stderr
    regressed = [v for v in _verdicts(out) if v[0] == "REGRESSED"]
    assert "lat_8B" in [v[2] for v in regressed], out
    assert slow.returncode == 1, out
    for _, check, figure, message in regressed:
        assert check == "imb_pingpong_check %cache=warm"
        assert figure.startswith(("bw_", "lat_")), figure
        match = MESSAGE.match(message)
        assert match, message
        assert match["change"][0] == ("-" if figure.startswith("bw_") else "+"), message
    assert re.search(r"History verdicts: \d+ regressed", out), out

    runs = Store(checkout / "var" / "local" / "history.sqlite").runs()
    assert runs[-1]["result"] == "regressed" and not runs[-1]["accepted"]
    assert all(r["accepted"] for r in runs[:-1])


def test_busy_cores_against_history(checkout: Path, hpcval: HpcvalRunner):
    """Default settings; K clean runs, a clean repeat (no per-figure line), then a
    run beside two busy loops per core: `regressed` or `unstable` on latency and
    on 1 MiB bandwidth, exit 1, left out of later baselines.

    Its premise is a machine otherwise idle: on one already running other work
    the clean runs are the busy condition (2026-11-25, load 5 on 2 cores from
    other people's builds: lat_0B 158-2,300 us over five "clean" runs, and the
    busy run's +371 % was rightly `inconclusive`), so it is skipped there. On an
    idle 2-core AMD EPYC VM (2026-11-26, load 0.4) the clean runs themselves were
    4.8x apart on bw_1MiB (4,857-23,248 MB/s, bimodal shared memory) and the busy
    run's bw_1MiB -85 % and unchanged lat_0B (3.26 us against 3.0-4.5 us) were
    `inconclusive` and `pass`; the second premise below (clean runs within a
    factor of 2, samples of a run within 50 %) skips such a machine."""
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0]
    if load > IDLE_LOAD * cores:
        pytest.skip(f"the machine is busy (load {load:.1f} on {cores} cores): clean runs "
                    "would not be clean")
    _no_bands(checkout, "imb_pingpong_check")
    for _ in range(K):
        clean = hpcval(checkout, "validate", "--site", "local", "--", *WARM)
        assert clean.returncode == 0, clean.stdout + clean.stderr
    # Its second premise: clean runs that agree with each other and within
    # themselves. Where their medians differ by more than a busy run is expected to
    # move them, or the samples of one clean run already scatter widely, the busy run
    # lies inside the clean noise and `inconclusive` is the right verdict: measured,
    # not assumed (docs/judging.md, "bimodal shared-memory bandwidth").
    store = Store(checkout / "var" / "local" / "history.sqlite")
    for name in ("bw_1MiB", "lat_0B"):
        points = store.history(variable=name)
        low, high = min(p.value for p in points), max(p.value for p in points)
        if high > CLEAN_RANGE * low:
            pytest.skip(f"clean runs on this machine differ by {high / low:.1f}x on {name} "
                        f"({_num(low)}-{_num(high)} {points[0].unit}), more than the busy run "
                        "is expected to move it: a busy run cannot be told from a clean one "
                        "here")
        scatter = statistics.median((max(p.samples) - min(p.samples)) / p.value
                                    for p in points)
        if scatter > CLEAN_SCATTER:
            pytest.skip(f"the samples of one clean run on this machine scatter by "
                        f"{100 * scatter:.0f} % on {name} (median over the clean runs): "
                        "the clean condition is not clean here")

    repeat = hpcval(checkout, "validate", "--site", "local", "--", *WARM)
    out = repeat.stdout + repeat.stderr
    assert "no-baseline" not in repeat.stdout, out
    assert repeat.returncode == 0, out
    assert not _verdicts(out), out
    assert re.search(r"^History verdicts: .*\d+ pass", repeat.stdout, re.MULTILINE), out

    with _busy_loops(BUSY_PER_CORE * cores):
        busy = hpcval(checkout, "validate", "--site", "local", "--", *WARM)
    out = busy.stdout + busy.stderr
    flagged = {figure for outcome, check, figure, _ in _verdicts(out)
               if outcome in ("REGRESSED", "UNSTABLE")
               and check == "imb_pingpong_check %cache=warm"}
    # the latency family: lat_0B, the first size IMB measures, waits for a rank
    # that was descheduled; 100 repetitions of 8 bytes fit in one time slice
    assert flagged & {"lat_0B", "lat_8B"}, out
    assert "bw_1MiB" in flagged, out
    assert busy.returncode == 1, out

    runs = Store(checkout / "var" / "local" / "history.sqlite").runs()
    assert runs[-1]["result"] in ("regressed", "unstable") and not runs[-1]["accepted"]
    assert all(r["accepted"] for r in runs[:-1])
