"""Host tuning audit on a fixture root directory and on this machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.core.errors import ParseError, SiteError
from hpcval.node import audit


@pytest.fixture
def host(tmp_path: Path) -> Path:
    files = {
        "sys/devices/system/cpu/smt/control": "on\n",
        "etc/tuned/active_profile": "throughput-performance\n",
        "proc/sys/net/core/busy_read": "0\n",
        "proc/sys/net/core/busy_poll": "50\n",
        "proc/sys/net/ipv4/tcp_rmem": "4096\t131072\t6291456\n",
        "sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
        "proc/sys/kernel/numa_balancing": "1\n",
        "sys/devices/system/cpu/vulnerabilities/meltdown": "Mitigation: PTI\n",
        "sys/devices/system/cpu/vulnerabilities/mds": "Vulnerable: Clear CPU buffers\n",
        "proc/cmdline": "BOOT_IMAGE=/vmlinuz root=/dev/sda1 mitigations=off\n",
        "proc/net/ip_tables_names": "filter\nnat\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def by_name(findings):
    return {f.setting: f for f in findings}


def test_settings_are_read_and_judged(host):
    expect = {"smt_control": "off", "tuned_profile": "network-latency",
              "net.core.busy_read": {"min": 50}, "net.core.busy_poll": {"min": 50},
              "transparent_hugepage": {"one_of": ["madvise", "never"]},
              "kernel.numa_balancing": 0, "mitigations": "off", "net.ipv4.tcp_rmem": "any"}
    found = by_name(audit.audit(expect, host))
    assert found["smt_control"].status == "mismatch"
    assert found["smt_control"].line() == "smt_control: found 'on', expected 'off'"
    assert found["tuned_profile"].found == "throughput-performance"
    assert found["net.core.busy_read"].line() == "net.core.busy_read: found '0', expected min 50"
    assert found["net.core.busy_poll"].status == "ok"
    assert found["transparent_hugepage"].found == "madvise"
    assert found["transparent_hugepage"].status == "ok"
    assert found["kernel.numa_balancing"].status == "mismatch"
    assert found["mitigations"].status == "ok"
    assert found["net.ipv4.tcp_rmem"].status == "info"
    assert found["net.ipv4.tcp_rmem"].found == "4096 131072 6291456"
    assert found["cpu_vulnerabilities"].found == "vulnerable: mds"
    assert found["selinux"].found == "disabled"
    assert found["iptables_tables"].found == "filter,nat"
    bad = {f.setting for f in audit.failures(list(found.values()))}
    assert bad == {"smt_control", "tuned_profile", "net.core.busy_read", "kernel.numa_balancing"}


def test_unreadable_setting_is_unknown_and_fails_unless_any(host):
    found = by_name(audit.audit({"net.ipv4.tcp_wmem": {"min": 1}, "net.ipv4.tcp_mem": "any"},
                                host))
    assert found["net.ipv4.tcp_wmem"].status == "unknown"
    assert "found unknown (unreadable)" in found["net.ipv4.tcp_wmem"].line()
    assert found["net.ipv4.tcp_mem"].status == "info"
    assert [f.setting for f in audit.failures(list(found.values()))] == ["net.ipv4.tcp_wmem"]


def test_no_tuned_is_a_finding_not_unknown(tmp_path):
    found = by_name(audit.audit({"tuned_profile": "network-latency"}, tmp_path))
    assert found["tuned_profile"].found == "none (tuned not installed)"
    assert found["tuned_profile"].status == "mismatch"


@pytest.mark.parametrize("text, message", [
    ("smt: 'off'\n", "smt: unknown setting"),
    ("net.core.busy_read: {minimum: 50}\n", "expected 'min', 'max' or 'one_of'"),
    ("net.core.busy_read: {min: fifty}\n", "net.core.busy_read.min: must be a number"),
    ("smt_control: [a, b]\n", "expected a value, 'any' or a mapping"),
    ("- a\n", "must map setting names"),
])
def test_bad_expectations_name_file_and_setting(tmp_path, text, message):
    path = tmp_path / "host-expectations.yaml"
    path.write_text(text)
    with pytest.raises(SiteError, match=message) as err:
        audit.load_expectations(path)
    assert str(path) in str(err.value)


def test_json_output_round_trips(host, tmp_path, capsys):
    path = tmp_path / "e.yaml"
    path.write_text("smt_control: 'off'\n")
    assert audit.main(["--expect", str(path), "--root", str(host), "--json"]) == 1
    findings = audit.parse_audit_output(capsys.readouterr().out)
    assert by_name(findings)["smt_control"].status == "mismatch"
    with pytest.raises(ParseError, match="the audit did not run"):
        audit.parse_audit_output("Traceback ...")


def test_this_machine_is_read(root):
    expect = audit.load_expectations(root / "site-configs" / "local" / "host-expectations.yaml")
    findings = by_name(audit.audit(expect))
    assert findings["rlimit_nofile"].found is not None
    assert findings["transparent_hugepage"].found in ("always", "madvise", "never", None)
    assert not audit.failures(list(findings.values()))
