#!/usr/bin/env python3
"""The vet report of a simulated partition in headless Chromium: its size, its
load time at 1400 px and 390 px, where the verdict and the first culprit end,
and a screenshot (docs/img/vet-<N>-1400.png).

The partition is hpcval.vet.simulate.simulated_result (bench/vet_simulate.py's
faults and noise, per-node figures with 5 % noise), judged by the same code;
the page is hpcval.vet.report.html_page. Load time is the page's own
performance.now() when its load event fires, inside an iframe of the window's
size (Chromium's headless window is at least 500 px wide).

    .venv/bin/python bench/vet_report.py [--nodes 4096] [--repeat 3] [--screenshot]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from integration.test_report_layout import _chromium, _probe  # noqa: E402

from hpcval.vet import report  # noqa: E402
from hpcval.vet.simulate import simulated_result  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--screenshot", action="store_true",
                    help="write docs/img/vet-<N>-1400.png")
    args = ap.parse_args()
    result = simulated_result(args.nodes)
    tmp = Path(tempfile.mkdtemp(prefix="vet-report-"))
    t0 = time.perf_counter()
    page = tmp / "vet.html"
    page.write_text(report.html_page(result))
    render = time.perf_counter() - t0
    print(f"{args.nodes} nodes, {len(result['verdict']['pairs']):,} pairs, "
          f"{len(result['verdict']['culprits'])} named; page {page.stat().st_size >> 10} KiB, "
          f"rendered in {render:.2f} s; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    for size in ((1400, 900), (390, 844)):
        for _ in range(args.repeat):
            seen = _probe(page, size)
            print(f"{size[0]} px: loaded in {seen['load_ms']:.0f} ms; scroll {seen['scroll']} "
                  f"/ client {seen['client']}; verdict ends at {seen['verdict']:.0f} px, first "
                  f"culprit at {seen['alarm']:.0f} px; {seen['elements']} elements, "
                  f"{seen['svg']} svg; wide: {seen['wide'] or 'none'}")
    if args.screenshot:
        shot = ROOT / "docs" / "img" / f"vet-{args.nodes}-1400.png"
        _chromium(f"--screenshot={shot}", page.as_uri())
        print(f"screenshot: {shot.relative_to(ROOT)}")
    print(f"load after {os.getloadavg()[0]:.1f}")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
