"""The vet report as a person reads it, in a real headless Chromium: a simulated
4096-node partition (hpcval.vet.simulate.simulated_result: two nodes 30 % slow,
one at a tenth, two slow links, a slow switch, judged by the vetting's own
code) and a 6-node lab run recorded on the lab (tests/data/vet). At 1400 px
and 390 px nothing runs off the right edge, and the first screen holds the
result and every culprit with its evidence. The load time is printed, not
asserted (docs/vet.md gives the one measured by bench/vet_report.py)."""

from __future__ import annotations

import html as htmllib
import json
from pathlib import Path

import pytest

from hpcval.vet import report
from hpcval.vet.run import judge_recorded
from hpcval.vet.simulate import simulated_result
from integration.test_report_layout import CHROMIUM, DESKTOP, PHONE, _probe

DATA = Path(__file__).resolve().parent.parent / "data" / "vet"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium (Debian: apt-get install "
                                                "chromium) to check the report's layout"),
]

#: Where the result and each culprit of the first list end, and what overflows.
_PROBE = """<!DOCTYPE html><html><body style='margin:0'>
<iframe id='f' src='{src}' style='width:{w}px;height:{h}px;border:0'></iframe><pre id='out'></pre>
<script>var f=document.getElementById('f');f.onload=function(){{
var w=f.contentWindow,d=f.contentDocument,t=w.performance.now(),e=d.documentElement;
var wide=[];d.querySelectorAll('body *').forEach(function(x){{
if((x.getBoundingClientRect().right>e.clientWidth+1||x.scrollWidth>x.clientWidth+1&&
getComputedStyle(x).overflowX==='visible'&&x.clientWidth)&&wide.length<5)wide.push(x.tagName+
'.'+x.className);}});
var named=[];d.querySelectorAll('#attention>ul.attn:first-of-type>li').forEach(function(x){{
named.push([x.querySelector('b')?x.querySelector('b').textContent:'',
x.getBoundingClientRect().bottom]);}});
document.getElementById('out').textContent=JSON.stringify({{inner:w.innerWidth,
scroll:e.scrollWidth,client:e.clientWidth,load_ms:t,
verdict:d.getElementById('verdict').getBoundingClientRect().bottom,named:named,
svg:d.getElementsByTagName('svg').length,wide:wide}});}};</script></body></html>"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    tmp = tmp_path_factory.mktemp("vet")
    big = simulated_result(4096)
    lab = json.loads((DATA / "one-bad-node.json").read_text())
    lab["verdict"] = judge_recorded(lab).to_dict()
    lab.update(id="20261123T205156Z-ebfeeb", site="lab", partition="lab", rounds=5,
               follow_up_rounds=0, jobs=1, steps=81, wall_seconds=67.0)
    out = {}
    for name, result in (("sim4096", big), ("lab6", lab)):
        page = tmp / f"{name}.html"
        page.write_text(report.html_page(result))
        out[name] = (page, result)
    return out


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1400px", "390px"])
@pytest.mark.parametrize("name", ["sim4096", "lab6"])
def test_vet_report_fits_and_shows_the_culprits_first(pages, name: str,
                                                      size: tuple[int, int]) -> None:
    page, result = pages[name]
    seen = _probe(page, size, _PROBE)
    assert seen["inner"] == size[0]
    assert seen["scroll"] <= seen["client"], f"{name} overflows at {size[0]} px: {seen}"
    assert not seen["wide"], seen["wide"]
    culprits = result["verdict"]["culprits"]
    assert culprits  # the simulated faults and lab-n3 are named
    assert [b for b, _ in seen["named"]] == [f"{c['kind']} {c['name']}" for c in culprits]
    assert seen["verdict"] <= size[1]
    last = max(bottom for _, bottom in seen["named"])
    assert last <= size[1], f"the last culprit ends at {last:.0f} px of {size[1]}: {seen}"
    print(f"{name} at {size[0]} px ({page.stat().st_size >> 10} KiB): loaded in "
          f"{seen['load_ms']:.0f} ms")


def test_simulated_report_marks_the_culprits_in_the_distributions(pages) -> None:
    page, result = pages["sim4096"]
    text = page.read_text()
    injected = result["injected"]
    for node in [*injected["slow30"], injected["slow90"]]:
        assert f"<title>{node}: " in text  # a mark in the per-node histogram
    for link in injected["slow_links"]:
        assert f"<title>{htmllib.escape(link)}: " in text
    assert f"{injected['slow_switch']} (named)" in text  # the per-switch table
    assert "id='heatmap'" not in text  # no 4096 x 4096 matrix
    assert "id='heatmap'" in pages["lab6"][0].read_text()
