"""Finding codes, uniformity against the partition's majority, error counters
since the previous reading, and the site's rules (hpcval.vet.coded, the
judging `hpcval vet` calls)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpcval.vet import coded, counters, healthdrain, uniformity
from hpcval.vet.findings import CODES, Finding
from hpcval.vet.model import Culprit, JudgeSettings, Verdict
from hpcval.vet.rules import Rules, parse
from hpcval.vet.simidentity import partition

ROOT = Path(__file__).resolve().parents[2]


def _named(verdict: Verdict) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for c in verdict.culprits:
        for n in c.nodes:
            out.setdefault(n, set()).add(c.code)
    return out


@pytest.mark.parametrize("n,seed", [(64, 0), (300, 1)])
def test_every_simulated_fault_is_named_with_its_code_and_no_healthy_node(n: int,
                                                                        seed: int) -> None:
    part = partition(n, share=0.001, seed=seed)
    verdict = Verdict(list(part.fingerprints))
    coded.judge(verdict, part.fingerprints, part.unknown, part.now, part.previous,
                JudgeSettings())
    named = _named(verdict)
    assert {n: {c} for n, c in part.expected.items()} == named
    assert verdict.partition == []
    for c in verdict.culprits:
        assert c.remedy == CODES[c.code].remedy and c.severity in ("off", "suspect", "unknown")


def _fp(model: str, cmdline: str = "ro") -> dict[str, dict[str, str]]:
    return {"cpu": {"model": model}, "kernel": {"cmdline": cmdline}}


def test_no_majority_is_one_partition_finding_not_one_per_node() -> None:
    fps = {"a": _fp("X"), "b": _fp("X"), "c": _fp("Y"), "d": _fp("Y")}
    found, maj, _ = uniformity.judge(fps)
    assert [(f.code, f.node) for f in found] == [("HC-UNI-SPLIT", "")]
    assert maj["cpu"]["model"]["value"] is None


def test_a_site_may_allow_two_cpu_models_and_names_a_third() -> None:
    fps = {"a": _fp("X"), "b": _fp("X"), "c": _fp("Y"), "d": _fp("Y"), "e": _fp("Z")}
    rules = parse({"allow": {"cpu": {"model": ["X", "Y"]}}}, Path("vet-rules.yaml"))
    found, _, _ = uniformity.judge(fps, rules=rules)
    assert [(f.code, f.node) for f in found] == [("HC-UNI-CPU", "e")]
    assert "not among the values the site allows" in found[0].text


def test_a_key_missing_where_the_majority_has_it_is_unknown_and_named() -> None:
    fps = {n: _fp("X") for n in "abcd"}
    del fps["c"]["kernel"]["cmdline"]
    found, _, _ = uniformity.judge(fps, {"d": {"cpu": ["model"]}})
    assert sorted((f.code, f.node) for f in found) == [("HC-UNI-UNKNOWN", "c"),
                                                       ("HC-UNI-UNKNOWN", "d")]


def _reading(t: float, **values: int | None) -> dict:
    return {"time": t, "values": {f"memory/edac/mc0/{k}": v for k, v in values.items()}}


def test_first_reading_records_a_baseline_and_judges_only_uncorrected_errors() -> None:
    now = {"a": _reading(0, ce=900, ue=0), "b": _reading(0, ce=0, ue=2),
           "c": _reading(0, ce=1, ue=0)}
    found, notes = counters.judge(now, {})
    assert [(f.code, f.node) for f in found] == [("HC-ECC-UE", "b")]
    assert "baseline recorded" in found[0].text and "baseline recorded" in notes[0]


def test_corrected_errors_against_the_partition_median_and_the_threshold() -> None:
    prev = {n: _reading(0, ce=0, ue=0) for n in "abcde"}
    now = {"a": _reading(3600, ce=5, ue=0), "b": _reading(3600, ce=5, ue=0),
           "c": _reading(3600, ce=5, ue=0), "d": _reading(3600, ce=40, ue=0),
           "e": _reading(3600, ce=60, ue=None)}
    found, _ = counters.judge(now, prev)
    # d: 40/h is above 10/h but not 10 x the median 5/h; e: 60/h is both
    assert sorted((f.code, f.node) for f in found) == [("HC-CNT-UNKNOWN", "e"),
                                                       ("HC-ECC-CE", "e")]


def test_a_counter_source_the_majority_has_missing_on_a_node_is_unknown() -> None:
    now = {n: _reading(10, ce=0, ue=0) for n in "abc"}
    now["d"] = {"time": 10, "values": {}}
    found, _ = counters.judge(now, {n: _reading(0, ce=0, ue=0) for n in "abc"})
    assert [(f.code, f.node) for f in found] == [("HC-CNT-UNKNOWN", "d")]
    assert "no EDAC" in found[0].text


def test_a_source_gone_from_the_whole_partition_is_one_note_not_every_node() -> None:
    # the lab's first vetting after the probe stopped reading veth counters named all 8
    # nodes HC-CNT-UNKNOWN: the previous readings had a source nobody has now
    prev = {n: _reading(0, ce=0, ue=0) for n in "abcdefgh"}
    for r in prev.values():
        r["values"]["network/nic/veth0/rx_errors"] = 0
    now = {n: _reading(7200, ce=0, ue=0) for n in "abcdefgh"}
    found, notes = counters.judge(now, prev)
    assert found == []
    assert any("not judged per node" in n and "8 of 8" in n for n in notes)
    # gone on one node while the others keep it: that node is named
    for n in "abcdefg":
        now[n]["values"]["network/nic/veth0/rx_errors"] = 0
    found, _ = counters.judge(now, prev)
    assert [(f.code, f.node) for f in found] == [("HC-CNT-UNKNOWN", "h")]
    # the gate judges one node alone: a source it lost is named
    found, _ = counters.judge({"h": now["h"]}, {"h": prev["h"]})
    assert [(f.code, f.node) for f in found] == [("HC-CNT-UNKNOWN", "h")]


def test_rules_change_severity_and_ignore_a_code() -> None:
    rules = parse({"codes": {"HC-IB-SYMBOL": {"severity": False},
                             "HC-UNI-KERNEL": {"severity": "ignore"}}}, Path("vet-rules.yaml"))
    found = [Finding("HC-IB-SYMBOL", "a", "a: +100"), Finding("HC-UNI-KERNEL", "b", "b: x")]
    kept, notes = rules.apply(found)
    assert [(f.code, f.severity) for f in kept] == [("HC-IB-SYMBOL", "off")]
    assert "ignored by vet-rules.yaml" in notes[0]


def test_figure_culprits_get_their_codes_and_only_off_findings_drain() -> None:
    from hpcval.vet.run import drain_reason, drainable

    verdict = Verdict(["a", "b", "c"])
    verdict.culprits.append(Culprit("node", "a", "triad_bw", "a: triad low", ["a"]))
    now = {n: _reading(3600, ce=0, ue=0) for n in "abc"}
    now["b"]["values"]["network/ib/mlx5_0/1/symbol_error"] = None
    coded.judge(verdict, {}, {}, now, {n: _reading(0, ce=0, ue=0) for n in "abc"},
                JudgeSettings())
    result = {"id": "X", "verdict": verdict.to_dict()}
    assert [c["code"] for c in result["verdict"]["culprits"]] == ["HC-TRIAD", "HC-CNT-UNKNOWN"]
    assert drainable(result) == ["a"]
    assert drain_reason(result, "a") == "hpcval vet [HC-TRIAD] X: a: triad low"


def test_health_drain_reasons_carry_the_new_codes_and_parse_back() -> None:
    reason = healthdrain.make_reason({"HC-ECC-UE": "[HC-ECC-UE] +1; remedy: replace",
                                      "triad_bw": "triad 1 MB/s"}, 1.8e9)
    own = healthdrain.parse_reason(reason)
    assert own is not None and own.codes == ("HC-ECC-UE", "HC-TRIAD")
    assert "\n" not in reason


def test_every_code_is_in_the_docs_table() -> None:
    text = (ROOT / "docs" / "vet.md").read_text()
    documented = set(re.findall(r"^\| `(HC-[A-Z-]+)` \|", text, re.MULTILINE))
    assert documented == set(CODES)


def test_the_real_probe_line_is_judged_and_one_changed_node_named() -> None:
    """This machine's probe line (hpcval.vet.probe, as every node prints it) as
    four nodes, one with another kernel command line and one DIMM fewer."""
    import copy
    import json
    import subprocess
    import sys

    from hpcval.vet.probe import MARKER

    out = subprocess.run([sys.executable, "-m", "hpcval.vet.probe", "--samples", "1"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    probe = json.loads(next(ln for ln in out.splitlines() if ln.startswith(MARKER))
                       [len(MARKER):])
    fps = {n: copy.deepcopy(probe["fingerprint"]) for n in ("a", "b", "c", "d")}
    fps["c"]["kernel"]["cmdline"] = fps["c"]["kernel"].get("cmdline", "") + " nosmt"
    fps["c"]["memory"]["total"] = "7/8 of it"
    readings = {n: {"time": 1.0, "values": probe["counters"]} for n in fps}
    verdict = Verdict(list(fps))
    coded.judge(verdict, fps, {n: probe["fingerprint_unknown"] for n in fps}, readings, {},
                JudgeSettings())
    assert _named(verdict) == {"c": {"HC-UNI-KERNEL", "HC-UNI-MEMORY"}}
    assert verdict.majority["kernel"]["cmdline"]["count"] == 3


def test_every_judged_figure_has_its_code() -> None:
    from hpcval.vet.findings import culprit_code
    from hpcval.vet.model import FIGURES, INFORMATIONAL

    for fig in set(FIGURES) - INFORMATIONAL:
        assert culprit_code("node", fig) != "HC-TUNING", fig
    assert culprit_code("node", "dgemm_gflops") == "HC-DGEMM"


def test_health_judges_its_node_against_the_last_vetting_and_its_previous_reading(
        tmp_path: Path) -> None:
    """hpcval health: the node's fingerprint against the majority the last full
    vetting recorded, its counters against its latest stored reading (here a
    health record newer than the vetting)."""
    import json

    from hpcval.vet.healthgate import identity_findings

    fps = {n: _fp("X") for n in "abcd"}
    verdict = Verdict(list(fps))
    coded.judge(verdict, fps, {}, {}, {}, JudgeSettings())
    vetting = {"id": "20261128T100000Z-aaaaaa", "verdict": verdict.to_dict(),
               "counters": {"b": _reading(1000.0, ce=0, ue=0)}}
    (tmp_path / "20261128T110000Z-bbbbbb-b.json").write_text(json.dumps(
        {"counters": _reading(2000.0, ce=0, ue=1)}))
    probe = {"fingerprint": _fp("X", cmdline="ro nosmt"), "fingerprint_unknown": {},
             "counters": {"memory/edac/mc0/ce": 0, "memory/edac/mc0/ue": 2},
             "read_at": 5600.0}
    found = identity_findings("b", probe, [vetting], JudgeSettings(), Rules(), tmp_path)
    assert sorted((f.code, f.severity) for f in found) == [("HC-ECC-UE", "off"),
                                                          ("HC-UNI-KERNEL", "suspect")]
    ue = next(f for f in found if f.code == "HC-ECC-UE")
    assert "+1 in 60 min" in ue.text and "health 20261128T110000Z-bbbbbb" in ue.text


def test_a_recorded_vetting_with_fingerprints_writes_codes_and_remedies(tmp_path: Path) -> None:
    """A recorded 6-node lab vetting (one node slow on the network) with a
    fingerprint per node, one node on another kernel command line: vet.txt,
    vet.html and vet.json name both findings with their codes and remedies."""
    import json

    from hpcval.vet import report, terminal
    from hpcval.vet.run import drain_reason, judge_recorded

    data = json.loads((ROOT / "tests" / "data" / "vet" / "one-bad-node.json").read_text())
    nodes = sorted({n for k in data["pair_samples"] for n in k.split("|")})
    data["fingerprints"] = {n: _fp("X", "ro nosmt" if n == "lab-n5" else "ro") for n in nodes}
    data["verdict"] = judge_recorded(data).to_dict()
    data.update(id="20261123T205156Z-ebfeeb", site="lab", partition="lab", rounds=5,
                follow_up_rounds=0, jobs=1, steps=81, wall_seconds=67.0)
    paths = report.write(data, tmp_path)
    text = terminal.text(data)
    assert "[HC-PAIR] lab-n3: PingPong 1 MiB" in text
    assert "[HC-UNI-KERNEL] lab-n5: kernel.cmdline is 'ro nosmt'; 5 of 6 nodes have 'ro'" in text
    assert CODES["HC-UNI-KERNEL"].remedy in text
    page = paths["html"].read_text()
    assert "<code>HC-UNI-KERNEL</code> suspect" in page
    stored = json.loads(paths["json"].read_text())
    assert {f["code"] for f in stored["verdict"]["findings"]} == {"HC-PAIR", "HC-UNI-KERNEL"}
    assert drain_reason(stored, "lab-n5").startswith("hpcval vet [HC-UNI-KERNEL] ")


@pytest.mark.parametrize("rise,named", [(1, False), (10, False), (11, True), (100, True)])
def test_a_rate_is_taken_over_at_least_an_hour(rise: int, named: bool) -> None:
    """Two readings a minute apart (health runs): symbol errors are named above
    10 per hour, the rise counted over at least one hour."""
    name = "network/ib/mlx5_0/1/symbol_error"
    prev = {n: {"time": 0.0, "values": {name: 7}} for n in "abc"}
    now = {n: {"time": 60.0, "values": {name: 7}} for n in "abc"}
    now["a"]["values"][name] += rise
    found, _ = counters.judge(now, prev)
    assert [(f.code, f.node) for f in found] == ([("HC-IB-SYMBOL", "a")] if named else [])


def test_a_long_value_is_shown_where_it_differs() -> None:
    # a kernel command line that differs at its end: both sides shown from the difference
    line = "BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-amd64 ro quiet console=ttyS0,115200 " \
           "mitigations=auto intel_iommu=on transparent_hugepage=never"
    fps = {n: {"kernel": {"cmdline": line}} for n in "abcd"}
    fps["d"] = {"kernel": {"cmdline": line.replace("=never", "=always")}}
    found, _, _ = uniformity.judge(fps)
    assert [(f.code, f.node) for f in found] == [("HC-UNI-KERNEL", "d")]
    assert "hugepage=always" in found[0].text and "hugepage=never" in found[0].text
