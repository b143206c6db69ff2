"""`hpcval vet` on a real 6-node lab: one node's link at 100 Mbit/s among 1 Gbit/s
links is named, and no other; `--drain` drains it with the evidence; `--gate`
says no while its link is still slow. About 3 minutes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcval.lab import cluster
from hpcval.vet import slurm as vslurm

from .conftest import lab_missing_reason

pytestmark = pytest.mark.lab

SLOW = "lab-n3"


@pytest.fixture(scope="module")
def lab6() -> Iterator[None]:
    reason = lab_missing_reason()
    if reason:
        pytest.skip(reason)
    cluster.up(6, fabric="1g", log=lambda *_: None, file_server=False)
    try:
        cluster.set_fabric("100m", node=SLOW)
        yield
    finally:
        cluster.down(log=lambda *_: None)


def hpcval(*args: str, var: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpcval.cli", *args], capture_output=True,
                          text=True, timeout=900, check=False,
                          env={**__import__("os").environ, "HPCVAL_VAR": str(var)})


def test_vet_names_the_slow_node_drains_it_and_the_gate_says_no(lab6: None,
                                                                  tmp_path: Path) -> None:
    proc = hpcval("vet", "--site", "lab", "--drain", "--quiet", var=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [result_file] = tmp_path.glob("lab/vet/*/vet.json")
    result = json.loads(result_file.read_text())
    assert result["verdict"]["named_nodes"] == [SLOW], proc.stdout
    assert result["jobs"] == 1 and result["rounds"] == 5
    page = (result_file.parent / "vet.html").read_text()
    heatmap = page[page.index("<section id='heatmap'>"):]
    assert heatmap[:heatmap.index("</section>")].count("<rect") == 30  # 15 pairs, both ways
    assert f"node   {SLOW}: PingPong 1 MiB" in proc.stdout
    info = vslurm.nodes_info([SLOW])[SLOW]
    assert "DRAIN" in info.state and "hpcval vet" in info.reason

    gate = hpcval("vet", "--site", "lab", "--gate", SLOW, "--quiet", var=tmp_path)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert f"gate {SLOW}: NO" in gate.stdout
    assert "DRAIN" in vslurm.nodes_info([SLOW])[SLOW].state
