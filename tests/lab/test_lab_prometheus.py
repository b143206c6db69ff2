"""A real vetting of a 6-node lab in a real Prometheus: links at 1g, lab-n3's
at 100m (as tests/lab/test_vet_lab.py and bench/vet_lab.sh shape it; on a
4-node lab, 2026-11-28 at load 14, lab-n3's PingPong at 12.5 MB/s, -84 %
against the median, was not named: `Named: none`, exit 0); `hpcval vet` names it,
`hpcval export` writes the vetting into node_exporter's textfile directory,
and Prometheus (tests/prometheus_stack.py: loopback, free ports, one-second
scrape and rule evaluation, the shipped monitoring/hpcval-rules.yml) shows
lab-n3 as a named node with its measured figure and fires HpcvalVetNamed for
it. Root, Slurm and Debian's Prometheus packages, else skipped with the
reason; takes the lab: run it under the lab lock
(`flock /tmp/hpcval-lab.lock pytest -m lab tests/lab/test_lab_prometheus.py`).
A few minutes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import prometheus_stack
import pytest

from hpcval.lab import cluster

from .conftest import lab_missing_reason

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(bool(prometheus_stack.missing()),
                       reason=f"{', '.join(prometheus_stack.missing())} not installed (Debian "
                              "packages: `make system-deps` as root)"),
]

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "monitoring" / "hpcval-rules.yml"
SLOW = "lab-n3"


def hpcval(*args: str, var: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpcval.cli", *args], capture_output=True,
                          text=True, timeout=900, check=False,
                          env={**os.environ, "HPCVAL_VAR": str(var)})


def test_a_node_the_vetting_names_fires_in_prometheus(tmp_path: Path) -> None:
    reason = lab_missing_reason()
    if reason:
        pytest.skip(reason)
    var = tmp_path / "var"
    cluster.up(6, fabric="1g", log=lambda *_: None, file_server=False)
    try:
        cluster.set_fabric("100m", node=SLOW)
        vet = hpcval("vet", "--site", "lab", "--quiet", var=var)
        [stored] = (var / "lab" / "vet").glob("*/vet.json")
        result = json.loads(stored.read_text())
        named = result["verdict"]["named_nodes"]
        assert vet.returncode == 1 and SLOW in named, vet.stdout + vet.stderr
    finally:
        cluster.down(log=lambda *_: None)

    with prometheus_stack.running(tmp_path / "prometheus", [RULES]) as stack:
        out = stack.textfile_dir / "hpcval-lab.prom"
        exported = hpcval("export", "--site", "lab", "-o", str(out), var=var)
        assert exported.returncode == 0, exported.stderr
        stack.wait_for("the vetting in Prometheus", lambda: stack.query(
            f'hpcval_vet_info{{job="node",vet="{result["id"]}"}}'))
        shown = stack.query('hpcval_vet_node_verdict{job="node",verdict="named"} == 1')
        assert sorted(s["metric"]["node"] for s in shown) == sorted(named)
        [value] = stack.query(f'hpcval_vet_node_figure{{node="{SLOW}",'
                              'figure="pingpong_bw_1MiB"}')
        assert float(value["value"][1]) == \
            result["verdict"]["table"][SLOW]["pingpong_bw_1MiB"]["value"]
        alerts = stack.wait_for(f"HpcvalVetNamed firing for {SLOW}", lambda: [
            a for a in stack.alerts() if a["labels"]["alertname"] == "HpcvalVetNamed"
            and a["state"] == "firing" and a["labels"]["name"] == SLOW])
        assert alerts[0]["labels"]["kind"] == "node"
        assert alerts[0]["labels"]["partition"] == "lab"
        print(f"vet {result['id']}: named {named}; {SLOW} PingPong 1 MiB "
              f"{float(value['value'][1]):.1f} MB/s; alert {alerts[0]['labels']}")
