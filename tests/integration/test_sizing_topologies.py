"""Case selection and sizing of the cfdio checks on big nodes, through ReFrame
(``--dry-run``: every hook runs and every job script is written, nothing is
launched): the `local` site's partition is given a recorded or constructed
topology of a real server (tests/data/topology/, ReFrame's processor JSON)
and its memory, and each case must get the rank variants that fit, all the
node's CPUs where it asks for the node, a size beyond the node's cache, a time
limit for that size, and its size and reason in the run report."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hpcval.node import sizing
from hpcval.node.topology import of_processor
from hpcval.rfm.site import intel_mpi_from_pypi

from .conftest import make_checkout

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(intel_mpi_from_pypi() is None,
                       reason="Intel MPI from PyPI (impi-rt, impi-devel) is not installed in "
                              "this Python environment: run `make setup`"),
]

BIN = Path(sys.executable).parent
DATA = Path(__file__).resolve().parents[1] / "data" / "topology"
GIB = 1 << 30

#: topology file -> node memory (tests/data/topology/README.md)
NODES = {"amd-2x64-epyc-7763-smt.json": 512 * GIB,
         "intel-2x56-xeon-8480-noht.json": 512 * GIB,
         "vm-16core-xeon-300mib-l3.json": 125 * GIB}


def _dry_run(tmp_path: Path, name: str, budget: str, *extra: str,
             environ_budget: str | None = None) -> tuple[list[dict], str]:
    checkout = make_checkout(tmp_path)
    config = checkout / "site-configs" / "local" / "config.py"
    config.write_text(config.read_text() + (
        "\n_part = site_configuration['systems'][0]['partitions'][0]\n"
        f"_part['processor'] = {json.loads((DATA / name).read_text())!r}\n"
        f"_part['extras']['mem_per_node'] = {NODES[name]}\n"
        f"_part['extras']['budget'] = {budget!r}\n"))
    env = dict(os.environ, HPCVAL_ROOT=str(checkout), HPCVAL_SPACK="0",
               HPCVAL_VAR=str(tmp_path / "var"))
    env.pop("HPCVAL_BUDGET", None)
    if environ_budget:
        env["HPCVAL_BUDGET"] = environ_budget  # as `hpcval validate --budget` sets it
    proc = subprocess.run(
        [str(BIN / "reframe"), "-C", str(config), "-c", "reframe-checks/io/cfdio_output_cost.py",
         "-c", "reframe-checks/memory/cfdio_stencil.py", "-c", "reframe-checks/io/cfdio_read.py",
         "-n", "cfdio_output_cost_check%strategy=mpiio", "-n", "cfdio_stencil_check",
         "-n", "cfdio_read_check", "-p", "impi", "--dry-run", *extra],
        cwd=checkout, env=env, text=True, capture_output=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    (report,) = (tmp_path / "var" / "local" / "reports").glob("run-report-*.json")
    cases = json.loads(report.read_text())["runs"][-1]["testcases"]
    return [c for c in cases if not c.get("fixture")], out  # the build is not a case


@pytest.mark.parametrize("name", sorted(NODES))
def test_big_node_cases_are_selected_and_sized(tmp_path: Path, name: str) -> None:
    info = json.loads((DATA / name).read_text())
    topo = of_processor(info)
    node = sizing.Node.of(topo, NODES[name])
    cases, out = _dry_run(tmp_path, name, "quick")
    by_name = {c["display_name"]: c for c in cases}

    ranks = sorted(int(re.search(r"%ranks=(\d+)", n).group(1))  # type: ignore[union-attr]
                   for n in by_name if n.startswith("cfdio_output_cost_check"))
    assert ranks == [n for n in (1, 2, 4, 8, 16, 32, 64) if n <= topo.num_cpus]
    readers = sorted(int(re.search(r"%readers=(\d+)", n).group(1))  # type: ignore[union-attr]
                     for n in by_name if n.startswith("cfdio_read_check"))
    assert readers == [1, 2, 4, 8]

    stencil = by_name["cfdio_stencil_check"]
    script = (Path(stencil["stagedir"]) / "rfm_job.sh").read_text()
    # the program its build fixture made, once per environment
    launch = re.search(r"-np (\d+) \S+/CfdioBuild_\w+/cfdio --global (\d+) (\d+) (\d+) "
                       r"--steps (\d+)", script)
    assert launch, script
    np_, nx, ny, nz = (int(g) for g in launch.groups()[:4])
    assert np_ == topo.num_cpus  # every CPU of the node
    assert 16 * nx * ny * nz >= 4 * node.llc_bytes  # beyond the cache
    assert 16 * nx * ny * nz / np_ >= 4 * node.llc_bytes / np_
    expected = sizing.stencil(node, np_, "quick")
    assert (nx, ny, nz) == expected.params["global_grid"]
    assert stencil["budget"] == "quick"
    assert stencil["problem_size"].startswith(f"grid {nx}x{ny}x{nz}")
    assert "last-level cache" in stencil["size_reason"]
    assert stencil["time_limit"] >= expected.time_limit_s

    for n, case in by_name.items():
        if n.startswith("cfdio_output_cost_check"):
            assert "fsync" in case["size_reason"] and case["problem_size"].endswith("[quick]")


def test_the_site_budget_full_gives_larger_outputs_and_longer_limits(tmp_path: Path) -> None:
    name = "vm-16core-xeon-300mib-l3.json"
    quick, _ = _dry_run(tmp_path / "q", name, "quick")
    full, _ = _dry_run(tmp_path / "f", name, "full")

    def output(cases: list[dict]) -> dict:
        return next(c for c in cases if c["display_name"].startswith(
            "cfdio_output_cost_check") and "%ranks=16" in c["display_name"])

    q, f = output(quick), output(full)
    assert q["budget"] == "quick" and f["budget"] == "full"
    grid = re.search(r"grid (\d+)x(\d+)x(\d+)", f["problem_size"])
    assert grid and 8 * math.prod(int(g) for g in grid.groups()) >= 1 * GIB
    assert f["time_limit"] > q["time_limit"]


def test_the_run_budget_wins_over_the_sites(tmp_path: Path) -> None:
    name = "vm-16core-xeon-300mib-l3.json"
    by_env, _ = _dry_run(tmp_path / "e", name, "quick", environ_budget="full")
    by_option, _ = _dry_run(tmp_path / "s", name, "full", "-S", "budget=quick")
    assert {c["budget"] for c in by_env} == {"full"}
    assert {c["budget"] for c in by_option} == {"quick"}
