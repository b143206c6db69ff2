"""GPU health audit on recorded nvidia-smi reports (tests/data/gpu/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpcval.core.errors import ParseError, SiteError
from hpcval.node import audit, gpu_audit
from hpcval.parsers.nvidia_smi import parse_nvidia_smi_xml

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu" / "nvidia-smi"

#: What a GPU cluster expects of every GPU node.
CLUSTER = {
    "gpu.count": 2,
    "gpu.driver_version": "375.66",
    "gpu.ecc_mode": "Enabled",
    "gpu.ecc_volatile_uncorrected": {"max": 0},
    "gpu.ecc_aggregate_uncorrected": {"max": 0},
    "gpu.retired_pages_pending": "No",
    "gpu.pcie_gen_fraction": {"min": 1},
    "gpu.pcie_width_fraction": {"min": 1},
    "gpu.clock_reasons": "none",
    "gpu.app_clocks_fraction": {"min": 1},
    "gpu.persistence_mode": "Enabled",
}


def log(name: str):  # type: ignore[no-untyped-def]
    return parse_nvidia_smi_xml((DATA / name).read_text(), name)


def bad(findings: list[gpu_audit.GpuFinding]) -> set[tuple[int | None, str]]:
    return {(f.gpu, f.setting) for f in gpu_audit.failures(findings)}


def test_healthy_recorded_node_fails_only_on_persistence_mode() -> None:
    findings = gpu_audit.audit_gpus(CLUSTER, log("p100x2-driver375.xml"))
    # persistence mode was off on the recorded node: the one thing it misses
    assert bad(findings) == {(0, "gpu.persistence_mode"), (1, "gpu.persistence_mode")}
    ok = {(f.gpu, f.setting) for f in findings if f.status == "ok"}
    assert (1, "gpu.pcie_width_fraction") in ok and (None, "gpu.count") in ok


def test_degraded_gpu_is_named_with_every_fault() -> None:
    expect = {**CLUSTER, "gpu.persistence_mode": "any"}
    findings = gpu_audit.audit_gpus(expect, log("degraded-pcie-x8-hw-slowdown.xml"))
    assert bad(findings) == {(1, "gpu.pcie_gen_fraction"), (1, "gpu.pcie_width_fraction"),
                             (1, "gpu.clock_reasons"), (1, "gpu.ecc_volatile_uncorrected"),
                             (1, "gpu.retired_pages_pending")}
    lines = {f.setting: f.line() for f in gpu_audit.failures(findings)}
    assert lines["gpu.pcie_width_fraction"] == (
        "GPU 1 (0000:82:00.0): gpu.pcie_width_fraction: found '0.5', expected min 1")
    assert "'hw_slowdown'" in lines["gpu.clock_reasons"]


def test_idle_gpu_with_a_downtrained_link_generation_is_information_not_a_failure() -> None:
    """The recorded RTX 4070 idles at PCIe gen 2 of 4 (power saving): shown with
    the reason; its width (8 of 8) is judged as always."""
    expect = {"gpu.pcie_gen_fraction": {"min": 1}, "gpu.pcie_gen": {"min": 4},
              "gpu.pcie_width_fraction": {"min": 1}}
    findings = gpu_audit.audit_gpus(expect, log("rtx4070-laptop-driver575.xml"))
    by = {f.setting: f for f in findings if f.gpu == 0}
    assert by["gpu.pcie_gen_fraction"].status == "info"
    assert "idle" in by["gpu.pcie_gen_fraction"].note
    assert by["gpu.pcie_gen"].status == "info"
    assert by["gpu.pcie_width_fraction"].status == "ok"
    assert gpu_audit.failures(findings) == []


def test_a_busy_gpu_with_a_downtrained_generation_fails() -> None:
    text = (DATA / "degraded-pcie-x8-hw-slowdown.xml").read_text()
    findings = gpu_audit.audit_gpus({"gpu.pcie_gen_fraction": {"min": 1}},
                                    parse_nvidia_smi_xml(text))
    [f] = gpu_audit.failures(findings)
    assert (f.gpu, f.found, f.status) == (1, "0.333", "mismatch")


def test_not_reported_is_unknown_and_fails_unless_any() -> None:
    """ECC is N/A on the recorded consumer GPU: a site expecting ECC is told so."""
    findings = gpu_audit.audit_gpus({"gpu.ecc_mode": "Enabled", "gpu.retired_pages": "any"},
                                    log("rtx4070-laptop-driver575.xml"))
    [f] = gpu_audit.failures(findings)
    assert (f.setting, f.status, f.found) == ("gpu.ecc_mode", "unknown", None)
    assert "unknown (not reported)" in f.line()


def test_gpu_keys_live_in_host_expectations_and_typos_are_refused(tmp_path: Path) -> None:
    good = tmp_path / "host-expectations.yaml"
    good.write_text("rlimit_nofile: {min: 1024}\ngpu.ecc_mode: Enabled\n"
                    "gpu.pcie_width_fraction: {min: 1}\n")
    data = audit.load_expectations(good)
    assert gpu_audit.gpu_expectations(data) == {"gpu.ecc_mode": "Enabled",
                                                "gpu.pcie_width_fraction": {"min": 1}}
    # the host audit ignores the gpu.* keys
    assert all(not f.setting.startswith("gpu.") for f in audit.audit(data, tmp_path))
    typo = tmp_path / "typo.yaml"
    typo.write_text("gpu.ecc_mod: Enabled\n")
    with pytest.raises(SiteError, match="gpu.ecc_mod: unknown setting"):
        audit.load_expectations(typo)


def test_command_line_json_round_trip_and_exit_codes(tmp_path: Path) -> None:
    expect = tmp_path / "e.yaml"
    expect.write_text("gpu.pcie_width_fraction: {min: 1}\n")
    run = [sys.executable, "-m", "hpcval.node.gpu_audit", "--expect", str(expect),
           "--json", "--xml"]
    done = subprocess.run([*run, str(DATA / "degraded-pcie-x8-hw-slowdown.xml")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1
    [f] = gpu_audit.failures(gpu_audit.parse_gpu_audit_output(done.stdout))
    assert (f.gpu, f.setting) == (1, "gpu.pcie_width_fraction")
    ok = subprocess.run([*run, str(DATA / "p100x2-driver375.xml")], capture_output=True,
                        text=True, check=False)
    assert ok.returncode == 0
    cut = tmp_path / "cut.xml"
    cut.write_text((DATA / "p100x2-driver375.xml").read_text()[:3000])
    broken = subprocess.run([*run, str(cut)], capture_output=True, text=True, check=False)
    assert broken.returncode == 3 and "cut off" in broken.stderr
    assert len(broken.stderr.strip().splitlines()) == 1


def test_no_nvidia_smi_is_an_environment_fault(tmp_path: Path) -> None:
    expect = tmp_path / "e.yaml"
    expect.write_text("gpu.count: 1\n")
    done = subprocess.run([sys.executable, "-m", "hpcval.node.gpu_audit", "--expect", str(expect)],
                          capture_output=True, text=True, check=False,
                          env={"PATH": str(tmp_path)})
    assert done.returncode == 3 and "nvidia-smi not found" in done.stderr


def test_malformed_audit_line() -> None:
    with pytest.raises(ParseError, match="did not run"):
        gpu_audit.parse_gpu_audit_output("nothing\n")
    with pytest.raises(ParseError, match="malformed"):
        gpu_audit.parse_gpu_audit_output(gpu_audit.MARKER + json.dumps([{"x": 1}]))


@pytest.mark.parametrize("name", ["p100x2-driver375.xml", "rtx4070-laptop-driver575.xml"])
def test_proposed_expectations_pass_the_node_they_were_read_from(name: str) -> None:
    proposal = gpu_audit.propose_expectations(log(name))
    assert set(proposal) <= set(gpu_audit.SETTINGS)
    assert gpu_audit.failures(gpu_audit.audit_gpus(proposal, log(name))) == []


def test_proposed_from_a_healthy_node_the_degraded_one_fails_on_each_fault() -> None:
    proposal = gpu_audit.propose_expectations(log("p100x2-driver375.xml"))
    assert proposal["gpu.ecc_volatile_uncorrected"] == {"max": 0}
    assert proposal["gpu.pcie_width_fraction"] == {"min": 1}
    assert proposal["gpu.remapped_rows_failure"] == "any"  # a Pascal GPU has no row remapper
    findings = gpu_audit.audit_gpus(proposal, log("degraded-pcie-x8-hw-slowdown.xml"))
    assert bad(findings) == {(1, "gpu.pcie_gen_fraction"), (1, "gpu.pcie_width_fraction"),
                             (1, "gpu.clock_reasons"), (1, "gpu.ecc_volatile_uncorrected"),
                             (1, "gpu.retired_pages_pending")}


def test_propose_on_the_command_line_writes_yaml_the_audit_reads(tmp_path: Path) -> None:
    xml = DATA / "p100x2-driver375.xml"
    done = subprocess.run([sys.executable, "-m", "hpcval.node.gpu_audit", "--propose", "--xml",
                           str(xml)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    path = tmp_path / "host-expectations.yaml"
    path.write_text(done.stdout)
    assert audit.load_expectations(path) == gpu_audit.propose_expectations(log(xml.name))
    audited = subprocess.run([sys.executable, "-m", "hpcval.node.gpu_audit", "--expect", str(path),
                              "--xml", str(xml)], capture_output=True, text=True, check=False)
    assert audited.returncode == 0, audited.stdout
    without = subprocess.run([sys.executable, "-m", "hpcval.node.gpu_audit", "--xml", str(xml)],
                             capture_output=True, text=True, check=False)
    assert without.returncode == 2 and "--expect FILE is needed" in without.stderr
