"""The cfdio checks on the `local` site for real: output cost, post-processing
read and stencil-vs-triad pass against the shipped references, and with a
shared file system in the partition (``extras.shared_fs_dir``, as the lab's
file server) the result files go there and nothing is left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcval.rfm.site import intel_mpi_from_pypi

from .conftest import HpcvalRunner

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(intel_mpi_from_pypi() is None,
                       reason="Intel MPI from PyPI is not installed: run `make setup`"),
]

CHECKS = ["-p", "impi", "-n", "cfdio_output_cost_check%strategy=mpiio%ranks=1$",
          "-n", "cfdio_output_cost_check%strategy=gather-to-root%ranks=1$",
          "-n", "cfdio_read_check%readers=1", "-n", "cfdio_read_check%readers=2",
          "-S", "cfdio_read_check.read_mb=8",
          # the triad at its default size: smaller arrays would run from cache and
          # make the stencil's fraction of it meaningless
          "-n", "cfdio_stencil_check"]


def _testcases(root: Path) -> list[dict]:
    reports = sorted((root / "var" / "local" / "reports").glob("run-report-*.json"))
    return json.loads(reports[-1].read_text())["runs"][0]["testcases"]


def _cases(root: Path) -> list[dict]:
    """The cases of the last run, without the fixtures they needed."""
    return [tc for tc in _testcases(root) if not tc.get("fixture")]


def _with_shared_fs(root: Path, shared: Path) -> None:
    config = root / "site-configs" / "local" / "config.py"
    text = config.read_text()
    old = '"extras": partition_extras(SITE_DIR),'
    assert old in text
    config.write_text(text.replace(
        old, f'"extras": partition_extras(SITE_DIR, shared_fs_dir={str(shared)!r}),'))


def test_cfdio_checks_pass_against_shipped_references(checkout: Path,
                                                      hpcval: HpcvalRunner) -> None:
    proc = hpcval(checkout, "validate", "--site", "local", "--", *CHECKS)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    cases = _cases(checkout)
    assert len(cases) == 5, [c["display_name"] for c in cases]
    assert all(c["result"] == "pass" for c in cases)
    # the proxy is built once for the environment, not once per case
    builds = [tc for tc in _testcases(checkout) if tc.get("fixture")]
    assert [b["name"] for b in builds] == ["CfdioBuild ~local:default+impi"], builds
    assert builds[0]["result"] == "pass"
    assert all(c["executable"] == f"{builds[0]['stagedir']}/cfdio" for c in cases), \
        [c["executable"] for c in cases]
    figures = {c["display_name"]: {p[0]: p[1] for p in c["perfvalues"].values()}
               for c in cases}
    (read2,) = [v for k, v in figures.items() if "readers=2" in k]
    assert read2  # judged against references
    stage = checkout / "var" / "local" / "stage"
    assert not list(stage.rglob("cfdio_step*")) and not list(stage.rglob("cfdio_read*.dat"))


def test_result_files_go_to_the_shared_fs_and_are_removed(checkout: Path, tmp_path: Path,
                                                          hpcval: HpcvalRunner) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    _with_shared_fs(checkout, shared)
    proc = hpcval(checkout, "validate", "--site", "local", "--", *CHECKS[:12])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    scripts = list((checkout / "var" / "local" / "output").rglob("rfm_job.sh"))
    assert len(scripts) == 4
    for script in scripts:
        text = script.read_text()
        assert f"--dir {shared}/hpcval-cfdio_" in text, text
        assert f"mkdir -p '{shared}/hpcval-cfdio_" in text
    assert list(shared.iterdir()) == []  # per-test directories removed, files too


def test_full_shared_fs_skips_the_case_saying_why_and_leaves_nothing(
        checkout: Path, tiny_fs, hpcval: HpcvalRunner) -> None:
    """The output-cost check whose shared file system cannot hold its least size
    beside the margin a run keeps free: the case is skipped naming the free
    space (docs/errors.md), and nothing is written there. Its only case skipped,
    the run validated nothing: exit 1 (`NOTHING VALIDATED`)."""
    tiny = tiny_fs("1m")
    _with_shared_fs(checkout, tiny)
    proc = hpcval(checkout, "validate", "--site", "local", "--", "-p", "impi",
                  "-n", "cfdio_output_cost_check%strategy=gather-to-root%ranks=1$")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "NOTHING VALIDATED" in proc.stdout
    (case,) = _cases(checkout)
    assert case["result"] == "skip", case
    assert "do not fit in the 0 B usable" in proc.stdout, proc.stdout[-3000:]
    assert "extras.shared_fs_dir" in proc.stdout
    assert list(tiny.iterdir()) == []


def test_cache_resident_stencil_fails_its_check(checkout: Path, hpcval: HpcvalRunner) -> None:
    """A grid forced into the caches (32³: 2 x 256 KiB) makes the stencil beat the
    triad of the same job; the physics guard fails the check with the reason.

    The proxy is built for this CPU (``-march=native``): built portably (SSE2)
    its stencil is compute-bound at about 14 GB/s a core on a 2-core AMD EPYC
    VM, where the triad from DRAM also gives about 14, so a cache-resident grid
    came out at 0.89x to 1.03x the triad and the guard caught it only by
    chance; built for the CPU the same grid gives about 1.5x (docs/checks.md)."""
    proc = hpcval(checkout, "validate", "--site", "local", "--", "-p", "impi",
                  "-n", "cfdio_stencil_check", "-S", "cfdio_stencil_check.global_grid=32,32,32",
                  "-S", "cfdio_stencil_check.steps=3000",
                  "-S", "CfdioBuild.cflags=-O3,-march=native,-std=c99")
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-2000:]
    (case,) = _cases(checkout)
    assert case["result"] == "fail"
    assert "cache-resident" in case["fail_reason"], case["fail_reason"]
    assert "-S global_grid" in case["problem_size"]
    assert "the rule would give: grid" in case["size_reason"]
