"""References files: validation errors name the file, the key and the reason."""

from __future__ import annotations

import pytest

from hpcval.core.errors import ReferencesError
from hpcval.reporting.report import CaseResult, PerfValue, RunReport
from hpcval.site import references as refs
from hpcval.site import refresolve

KNOWN = {"imb_pingpong_check", "osu_bw_check"}

GOOD = """
imb_pingpong_check:
  $index: [$environ, cache]
  '.*':
    warm:
      lat_0B: [2.0, null, 0.5, us]
      bw_1MiB: [5000, -0.2, null, MB/s]
  impi:
    cold:
      lat_0B: [3.0, -0.5, 0.5, us]
osu_bw_check:
  '*':
    bw: [100, -0.1, 0.1, MB/s]
  'local:default':
    bw: ['$xfail', 'known slow NIC', [50, -0.1, 0.1, MB/s]]
"""


def write(tmp_path, text, name="references.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_good_file_loads(tmp_path):
    ref_file = refs.load_references(write(tmp_path, GOOD), KNOWN)
    entry = ref_file.entry("imb_pingpong_check")
    assert entry.index == ("$environ", "cache")
    attrs = {"$environ": "impi", "cache": "cold"}
    got = refresolve.resolve(entry, ref_file.path, attrs.__getitem__, "local", "default")
    assert got == {"lat_0B": refs.Reference(3.0, -0.5, 0.5, "us")}
    attrs = {"$environ": "openmpi", "cache": "warm"}
    got = refresolve.resolve(entry, ref_file.path, attrs.__getitem__, "local", "default")
    assert got["bw_1MiB"].bounds() == (4000.0, None)
    assert got["lat_0B"].bounds() == (None, 3.0)


def test_scopes_merge_like_reframe(tmp_path):
    ref_file = refs.load_references(write(tmp_path, GOOD), KNOWN)
    entry = ref_file.entry("osu_bw_check")
    here = refresolve.resolve(entry, ref_file.path, {}.__getitem__, "local", "default")
    assert here["bw"].xfail == "known slow NIC" and here["bw"].value == 50
    there = refresolve.resolve(entry, ref_file.path, {}.__getitem__, "lab", "compute")
    assert there["bw"].value == 100 and there["bw"].xfail is None


@pytest.mark.parametrize("text, key, reason", [
    ("imb_pingpong_chek:\n  '*':\n    lat_0B: [1, null, 0, us]\n",
     "imb_pingpong_chek", "did you mean 'imb_pingpong_check'"),
    ("imb_pingpong_check:\n  '*':\n    lat_0B: [fast, null, 0, us]\n",
     "imb_pingpong_check.*.lat_0B", "reference value must be a number, got 'fast'"),
    ("imb_pingpong_check:\n  '*':\n    lat_0B: ['1.5', null, 0, us]\n",
     "imb_pingpong_check.*.lat_0B", "must be a number, got '1.5'"),
    ("imb_pingpong_check:\n  '*':\n    lat_0B: [1.5, null, high, us]\n",
     "imb_pingpong_check.*.lat_0B", "upper threshold must be a number or null"),
    ("imb_pingpong_check:\n  '*':\n    lat_0B: [1.5, us]\n",
     "imb_pingpong_check.*.lat_0B", "a reference is [value, lower, upper, unit]"),
    ("imb_pingpong_check:\n  '*':\n    lat_0B: 1.5\n",
     "imb_pingpong_check.*.lat_0B", "a reference is [value, lower, upper, unit]"),
    ("imb_pingpong_check:\n  '*':\n    lat_0B: [1.5, 0.2, 0.1, us]\n",
     "imb_pingpong_check.*.lat_0B", "lower threshold 0.2 must be between -1 and 0"),
    ("imb_pingpong_check:\n  '*':\n    lat_0B: [1.5, -0.2, -0.1, us]\n",
     "imb_pingpong_check.*.lat_0B", "upper threshold -0.1 must be >= 0"),
    ("imb_pingpong_check:\n  '*':\n    lat_0B: [1.5, null, 0, 7]\n",
     "imb_pingpong_check.*.lat_0B", "unit must be a string"),
    ("imb_pingpong_check:\n  $index: cache\n  warm: {lat_0B: [1, null, 0, us]}\n",
     "imb_pingpong_check.$index", "must be a list of attribute names"),
    ("imb_pingpong_check:\n  $index: [cache]\n  warm: [1, null, 0, us]\n",
     "imb_pingpong_check.warm", "expected a mapping of variable"),
    ("imb_pingpong_check:\n  $index: [$environ, cache]\n  impi:\n    lat_0B: [1, null, 0, us]\n",
     "imb_pingpong_check.impi.lat_0B", "puts 2 level(s) above the variables: is a level"),
    ("imb_pingpong_check: [1, 2]\n", "imb_pingpong_check", "expected a mapping"),
    ("imb_pingpong_check:\n  '*':\n    lat_0B: [1, null, 0, us\n", "line", "not valid YAML"),
    ("- just\n- a list\n", "", "top level must map check names"),
])
def test_bad_files_are_rejected_naming_file_key_and_reason(tmp_path, text, key, reason):
    path = write(tmp_path, text)
    with pytest.raises(ReferencesError) as err:
        refs.load_references(path, KNOWN)
    assert err.value.path == str(path)
    assert err.value.key.startswith(key)
    assert reason in err.value.reason
    assert str(path) in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(ReferencesError, match="references file not found"):
        refs.load_references(tmp_path / "nope.yaml")


def test_subclass_without_entry_is_told_about_its_parent(tmp_path):
    ref_file = refs.load_references(write(tmp_path, GOOD), KNOWN | {"site_pingpong_check"})
    with pytest.raises(ReferencesError, match=r"derives from 'imb_pingpong_check'.*"
                                              r"reference_entry = 'imb_pingpong_check'"):
        ref_file.entry("site_pingpong_check", ["imb_pingpong_check", "HpcvalTest"])


def test_integer_index_keys_must_not_be_quoted(tmp_path):
    text = ("imb_pingpong_check:\n  $index: [num_tasks]\n  '2':\n"
            "    lat_0B: [1.0, null, 0.5, us]\n")
    ref_file = refs.load_references(write(tmp_path, text), KNOWN)
    entry = ref_file.entry("imb_pingpong_check")
    with pytest.raises(ReferencesError, match=r"key '2' is a string but num_tasks is int 2: "
                                              r"write it without quotes"):
        refresolve.resolve(entry, ref_file.path, {"num_tasks": 2}.__getitem__, "s", "p")


def test_string_index_keys_must_be_quoted(tmp_path):
    text = "imb_pingpong_check:\n  $index: [variant]\n  8:\n    lat_0B: [1.0, null, 0.5, us]\n"
    ref_file = refs.load_references(write(tmp_path, text), KNOWN)
    with pytest.raises(ReferencesError, match=r"key 8 is a int but variant is the string '8'"):
        refresolve.resolve(ref_file.entry("imb_pingpong_check"), ref_file.path,
                     {"variant": "8"}.__getitem__, "s", "p")


def test_unmatched_index_value_lists_the_keys(tmp_path):
    ref_file = refs.load_references(write(tmp_path, GOOD), KNOWN)
    attrs = {"$environ": "impi", "cache": "lukewarm"}
    with pytest.raises(ReferencesError, match=r"imb_pingpong_check.impi: no reference for "
                                              r"cache='lukewarm' \(keys here: 'cold'\)"):
        refresolve.resolve(ref_file.entry("imb_pingpong_check"), ref_file.path, attrs.__getitem__,
                     "local", "default")


def test_no_scope_applies(tmp_path):
    text = "osu_bw_check:\n  'lab:compute':\n    bw: [1, -0.1, null, MB/s]\n"
    ref_file = refs.load_references(write(tmp_path, text), KNOWN)
    with pytest.raises(ReferencesError, match=r"no scope applies to local:default"):
        refresolve.resolve(ref_file.entry("osu_bw_check"), ref_file.path, {}.__getitem__,
                     "local", "default")


def test_variables_must_match_what_the_check_reports():
    have = {"lat_0B": refs.Reference(1, None, 0, "us"),
            "bw_4MB": refs.Reference(1, 0, None, "MB/s")}
    with pytest.raises(ReferencesError, match=r"missing reference for variable\(s\) bw_4MiB"):
        refs.check_variables(have, {"lat_0B": "us", "bw_4MiB": "MB/s", "bw_4MB": "MB/s"},
                             "r.yaml", "imb_pingpong_check")
    have["bw_4MiB"] = refs.Reference(1, 0, None, "MB/s")
    with pytest.raises(ReferencesError, match=r"unknown variable\(s\) bw_4MB \(did you mean "
                                              r"bw_4MiB\?\)"):
        refs.check_variables(have, {"lat_0B": "us", "bw_4MiB": "MB/s"}, "r.yaml", "x")
    with pytest.raises(ReferencesError, match=r"x.lat_0B: unit 'us' differs from the check's "
                                              r"'ms'"):
        refs.check_variables({"lat_0B": refs.Reference(1, None, 0, "us")}, {"lat_0B": "ms"},
                             "r.yaml", "x")


def test_check_names_are_read_from_check_files(root):
    names = refs.check_names_in(root / "reframe-checks")
    assert "imb_pingpong_check" in names


def test_shipped_site_references_are_valid(root):
    names = refs.check_names_in(root / "reframe-checks")
    for path in sorted((root / "site-configs").glob("*/references.yaml")):
        refs.load_references(path, names)


def _report(cases):
    return RunReport(path=None, session={"hostname": "h"}, cases=cases)  # type: ignore[arg-type]


def _case(display, environ, perf, result="pass", cache=None):
    raw = {"cache": cache} if cache else {}
    return CaseResult(display.split()[0], display, "local", "default", environ, result, None,
                      None, "intel-mpi", perf, None, None, raw)


def test_capture_keeps_index_and_unbounded_sides(tmp_path):
    existing = refs.load_references(write(tmp_path, GOOD), KNOWN)
    report = _report([
        _case("imb_pingpong_check %cache=cold", "impi",
              [PerfValue("lat_0B", 2.5, 3.0, -0.5, 0.5, "us", "pass")], cache="cold"),
        _case("brand_new_check %size=8", "impi",
              [PerfValue("rate", 1234.5678, None, None, None, "op/s", "pass")]),
    ])
    report.cases[1].raw["size"] = 8
    data = refresolve.capture(report, 0.25, existing)
    assert data["imb_pingpong_check"]["$index"] == ["$environ", "cache"]
    assert data["imb_pingpong_check"]["impi"]["cold"]["lat_0B"] == [2.5, -0.25, 0.25, "us"]
    # an entry whose side was unbounded stays unbounded on that side
    assert data["imb_pingpong_check"][".*"]["warm"]["bw_1MiB"] == [5000, -0.2, None, "MB/s"]
    # a new figure is bounded on its worse side only: a faster run never fails
    assert data["brand_new_check"] == {"$index": ["$environ", "size"],
                                       "impi": {8: {"rate": [1234.57, -0.25, None, "op/s"]}}}
    assert "osu_bw_check" in data  # checks absent from the run are kept
    out = write(tmp_path, refresolve.dump_references(data, "# header\n"), "captured.yaml")
    assert "lat_0B: [2.5, -0.25, 0.25, us]" in out.read_text()
    again = refs.load_references(out)
    assert again.entries["brand_new_check"].data["impi"][8]["rate"][0] == 1234.57


def test_capture_rejects_silly_tolerance():
    with pytest.raises(ReferencesError, match="between 0 and 1"):
        refresolve.capture(_report([]), 25, None)


def test_capture_skips_cases_without_trustworthy_figures():
    report = _report([_case("imb_pingpong_check %cache=warm", "impi", [], result="fail")])
    assert refresolve.capture(report, 0.1, None) == {}
