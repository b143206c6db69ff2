"""The comparison page (``hpcval compare``) as people see it, in headless
Chromium, like the report (test_report_layout.py): it fits a 1400-pixel window
and a 390-pixel phone, and the conclusion is on the first screen. The page
compares stored runs tagged alternately before and after a change (the
bandwidths 20 % lower after), with Intel MPI and Open MPI. With
``HPCVAL_SCREENSHOTS=DIR`` the screenshots are written there (docs/img)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from history_maker import Case, Change, Fig, make_site, write_run

from hpcval.history.judging.compare import compare_sets
from hpcval.history.runsets import Side, resolve
from hpcval.history.store import Store
from hpcval.reporting import comparepage
from hpcval.reporting.report import load_run_report
from hpcval.run.verdicts import store_and_judge

from .test_report_layout import CHROMIUM, DESKTOP, PHONE, _chromium, _probe

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium (Debian: apt-get install "
                                                "chromium) to check the page's layout"),
]

CASES = [Case("imb_pingpong_check", {"cache": "warm"}, [
    Fig(f"bw_{s}", "MB/s", "higher", v) for s, v in
    (("2KiB", 900), ("16KiB", 4200), ("256KiB", 12000), ("1MiB", 18700), ("4MiB", 19000))
] + [Fig("lat_0B", "us", "lower", 1.3), Fig("lat_8B", "us", "lower", 1.4)], environ=env)
    for env in ("impi", "openmpi")] + [
    Case("stream_check", {}, [Fig("triad", "MB/s", "higher", 45000)])]


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("compare")
    site = make_site(tmp)
    rng = np.random.default_rng(8)
    for i in range(10):
        after = i % 2 == 1
        changes = [Change("imb_pingpong_check", f"bw_{s}", 0.8)
                   for s in ("256KiB", "1MiB", "4MiB")] if after else []
        run_id, path = write_run(site, rng, CASES, changes, start=1.79e9 + 3600 * i)
        judged = store_and_judge(site, run_id, load_run_report(path),
                                 tags={"nic": "new" if after else "old"})
        assert judged.store_error is None
    settings = site.load_judging()
    a, b = Side.parse("A", "tag:nic=old"), Side.parse("B", "tag:nic=new")
    got = resolve(Store(site.history_db), a, b, settings)
    comp = compare_sets(got.figures, settings, size_range=(2048.0, float(4 << 20)))
    assert comp.outcome == "worse"
    info = [comparepage.SideInfo("A", a.describe(), got.runs_a),
            comparepage.SideInfo("B", b.describe(), got.runs_b)]
    out = tmp / "compare.html"
    out.write_text(comparepage.page(comp, info, "tag:nic=old vs tag:nic=new"))
    return out


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1400px", "390px"])
def test_compare_page_fits_and_concludes_on_the_first_screen(page: Path,
                                                             size: tuple[int, int]) -> None:
    seen = _probe(page, size)
    assert seen["inner"] == size[0]
    assert seen["scroll"] <= seen["client"], f"overflows at {size[0]} px: {seen}"
    assert not seen["wide"], seen["wide"]
    assert seen["svg"] == 5  # a ratio plot per family (2 cases x 2 MPI stacks, stream)
    assert seen["verdict"] is not None and seen["verdict"] <= size[1], seen
    assert "WORSE: B is worse than A" in page.read_text()


def test_screenshots(page: Path, tmp_path: Path) -> None:
    """Screenshots at 1400 px and at a phone's 390 px (inside a probe frame,
    Chromium's window being at least 500 px wide)."""
    where = Path(os.environ.get("HPCVAL_SCREENSHOTS") or tmp_path)
    shot = where / "compare-1400.png"
    _chromium("--window-size=1400,1000", f"--screenshot={shot}", page.as_uri())
    assert shot.is_file() and shot.stat().st_size > 0
    frame = page.with_name("phone.html")
    frame.write_text("<!DOCTYPE html><html><body style='margin:0'><iframe src='"
                     f"{page.name}' style='width:390px;height:1400px;border:0'></iframe>"
                     "</body></html>")
    phone = where / "compare-390.png"
    _chromium("--allow-file-access-from-files", "--window-size=500,1400",
              f"--screenshot={phone}", frame.as_uri())
    assert phone.is_file() and phone.stat().st_size > 0
    from PIL import Image  # matplotlib's dependency: crop the frame's 390 px

    with Image.open(phone) as img:
        img.crop((0, 0, 390, img.height)).save(phone)
