"""Bad input: references, host expectations and command-line arguments a
person gets wrong. Each case is one ``hpcval`` command on a checkout that
already holds a stored run; it must exit 2 with one line naming the file and
the key, print no traceback, leave the stored results as they were, and run
no benchmark."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import (
    CHECKS,
    assert_clean_failure,
    make_checkout,
    run,
    run_inprocess,
    tree_digest,
)

pytestmark = pytest.mark.integration

REFS = "site-configs/local/references.yaml"
HOST = "site-configs/local/host-expectations.yaml"
JUDGING = "site-configs/local/judging.yaml"
TUNING = "site-configs/local/mpi-tuning.yaml"

PINGPONG_OK = """imb_pingpong_check:
  $index: [cache]
  warm: {lat_0B: [100.0, null, 0.0, us], lat_8B: [100.0, null, 0.0, us],
         bw_2KiB: [20.0, 0.0, null, MB/s], bw_64KiB: [100.0, 0.0, null, MB/s],
         bw_1MiB: [200.0, 0.0, null, MB/s], bw_4MiB: [200.0, 0.0, null, MB/s]}
"""


def _alias_bomb(levels: int = 12) -> bytes:
    """A few kilobytes of YAML whose aliases expand 9-fold per level."""
    lines = ["a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return ("imb_pingpong_check:\n  '*':\n    lat_0B: [1, null, 0, us]\n" + "\n".join(lines)
            + "\n").encode()


@dataclass(frozen=True)
class Case:
    """One bad input: the file written (or None), its content, the command,
    the exit code and what the error line must name."""

    name: str
    file: str | None
    content: bytes
    args: tuple[str, ...]
    code: int
    names: tuple[str, ...]


def refs_case(name: str, text: str | bytes, *names: str,
              args: tuple[str, ...] = ("references", "check", "--site", "local")) -> Case:
    data = text.encode() if isinstance(text, str) else text
    return Case(name, REFS, data, args, 2, ("references.yaml", *names))


CASES = [
    # --- references.yaml: what `references check` (and a run) reject -------------
    refs_case("non-utf8-byte", PINGPONG_OK.replace("us]", "\xb5s]", 1).encode("latin-1"),
              "byte offset", "not UTF-8 (byte 0xb5)"),
    refs_case("alias-bomb", _alias_bomb(), "YAML too large"),
    refs_case("deep-nesting", "x: " + "[" * 5000 + "]" * 5000 + "\n", "nested"),
    refs_case("duplicate-key", PINGPONG_OK + "imb_pingpong_check:\n  '*': {}\n",
              "'imb_pingpong_check' given twice", "keep one"),
    refs_case("yaml-syntax", "imb_pingpong_check:\n  '*': [1, 2\n", "line", "not valid YAML"),
    refs_case("top-level-list", "- imb_pingpong_check\n", "top level must map"),
    refs_case("unknown-check", PINGPONG_OK + "imb_pinpong_check:\n  '*': {x: [1, 0, 0, us]}\n",
              "imb_pinpong_check", "did you mean 'imb_pingpong_check'"),
    refs_case("lower-threshold-positive",
              PINGPONG_OK.replace("bw_2KiB: [20.0, 0.0,", "bw_2KiB: [20.0, 0.5,"),
              "imb_pingpong_check.warm.bw_2KiB", "lower threshold 0.5"),
    refs_case("upper-threshold-negative",
              PINGPONG_OK.replace("lat_0B: [100.0, null, 0.0,", "lat_0B: [100.0, null, -0.2,"),
              "imb_pingpong_check.warm.lat_0B", "upper threshold -0.2"),
    refs_case("zero-reference-positive-lower",
              PINGPONG_OK.replace("lat_0B: [100.0, null, 0.0,", "lat_0B: [0, 0.5, null,"),
              "imb_pingpong_check.warm.lat_0B", "ReFrame would reject"),
    refs_case("negative-reference-upper-above-1",
              PINGPONG_OK.replace("lat_0B: [100.0, null, 0.0,", "lat_0B: [-5, null, 1.5,"),
              "imb_pingpong_check.warm.lat_0B", "ReFrame would reject"),
    refs_case("string-value", PINGPONG_OK.replace("[100.0, null, 0.0, us], lat_8B",
                                                  "[fast, null, 0.0, us], lat_8B"),
              "lat_0B", "must be a number"),
    refs_case("nan-value", PINGPONG_OK.replace("[100.0, null, 0.0, us], lat_8B",
                                               "[.nan, null, 0.0, us], lat_8B"),
              "lat_0B", "must be a number"),
    refs_case("inf-value", PINGPONG_OK.replace("[100.0, null, 0.0, us], lat_8B",
                                               "[.inf, null, 0.0, us], lat_8B"),
              "lat_0B", "must be a number"),
    refs_case("bool-value", PINGPONG_OK.replace("[100.0, null, 0.0, us], lat_8B",
                                                "[true, null, 0.0, us], lat_8B"),
              "lat_0B", "must be a number"),
    refs_case("short-tuple", PINGPONG_OK.replace("[100.0, null, 0.0, us], lat_8B",
                                                 "[100.0, null], lat_8B"),
              "lat_0B", "[value, lower, upper, unit]"),
    refs_case("unit-not-string", PINGPONG_OK.replace("[100.0, null, 0.0, us], lat_8B",
                                                     "[100.0, null, 0.0, 7], lat_8B"),
              "lat_0B", "unit must be a string"),
    refs_case("bad-regex-key", PINGPONG_OK.replace("  warm:", "  'warm(':"),
              "imb_pingpong_check.warm(", "invalid regular expression"),
    refs_case("regex-scope-without-index",
              "imb_pingpong_check:\n  '.*': {lat_0B: [100.0, null, 0.0, us]}\n",
              "imb_pingpong_check..*", "not a ReFrame scope"),
    refs_case("index-attribute-missing", PINGPONG_OK.replace("$index: [cache]",
                                                             "$index: [cahce]"),
              "imb_pingpong_check.$index", "no attribute 'cahce'", "did you mean 'cache'"),
    refs_case("index-not-a-list", PINGPONG_OK.replace("$index: [cache]", "$index: cache"),
              "imb_pingpong_check.$index", "must be a list"),
    refs_case("index-level-missing",
              PINGPONG_OK.replace("$index: [cache]", "$index: [cache, $environ]"),
              "imb_pingpong_check.warm", "is a level missing"),
    refs_case("entry-not-mapping", "imb_pingpong_check: 5\n", "imb_pingpong_check",
              "expected a mapping"),
    refs_case("empty-scope", "imb_pingpong_check:\n  '*': {}\n", "imb_pingpong_check.*",
              "expected a mapping of variable"),
    refs_case("xfail-malformed", PINGPONG_OK.replace("[100.0, null, 0.0, us], lat_8B",
                                                     "['$xfail', [100.0, null, 0.0, us]], lat_8B"),
              "lat_0B", "expected failure"),
    # variables and units, against the figures the check class declares
    refs_case("unknown-variable",
              PINGPONG_OK.replace("lat_8B: [100.0, null, 0.0, us],",
                                  "lat_8B: [100.0, null, 0.0, us], lat_9B: [1.0, null, 0.0, us],"),
              "imb_pingpong_check.warm", "unknown variable(s) lat_9B"),
    refs_case("missing-variable", PINGPONG_OK.replace(", bw_4MiB: [200.0, 0.0, null, MB/s]", ""),
              "imb_pingpong_check.warm", "missing reference for variable(s) bw_4MiB"),
    refs_case("unit-differs", PINGPONG_OK.replace("lat_0B: [100.0, null, 0.0, us]",
                                                  "lat_0B: [100.0, null, 0.0, ms]"),
              "imb_pingpong_check.warm.lat_0B", "unit 'ms' differs from the check's 'us'"),
    refs_case("scoped-unit-differs",
              "imb_sendrecv_exchange_check:\n  '*': {sendrecv_t_8B: [100.0, null, 0.0, ms]}\n"
              "  'local': {sendrecv_bw_1MiB: [200.0, 0.0, null, MB/s]}\n",
              "imb_sendrecv_exchange_check.*.sendrecv_t_8B", "unit 'ms' differs"),
    refs_case("validate-unit-differs", PINGPONG_OK.replace("lat_0B: [100.0, null, 0.0, us]",
                                                           "lat_0B: [100.0, null, 0.0, ms]"),
              "imb_pingpong_check.warm.lat_0B", "unit 'ms' differs",
              args=("validate", "--site", "local")),
    refs_case("non-string-check-name", "42:\n  '*': {lat_0B: [1, null, 0, us]}\n", "42",
              "check names must be strings"),
    # the same files refused by `validate` before any benchmark runs
    refs_case("validate-non-utf8", PINGPONG_OK.replace("us]", "\xb5s]", 1).encode("latin-1"),
              "byte offset", args=("validate", "--site", "local")),
    refs_case("validate-alias-bomb", _alias_bomb(), "YAML too large",
              args=("validate", "--site", "local")),
    refs_case("validate-index-attribute", PINGPONG_OK.replace("$index: [cache]",
                                                              "$index: [cahce]"),
              "no attribute 'cahce'", args=("validate", "--site", "local")),
    refs_case("validate-reframe-threshold",
              PINGPONG_OK.replace("lat_0B: [100.0, null, 0.0,", "lat_0B: [0, 0.5, null,"),
              "ReFrame would reject", args=("validate", "--site", "local")),
    # --- judging.yaml: refused by `references check`, and by `validate` before
    # any benchmark runs ---------------------------------------------------------
    Case("judging-non-utf8", JUDGING, b"k: 5\nthreshold: \"5\xff%\"\n",
         ("references", "check", "--site", "local"), 2,
         ("judging.yaml", "byte offset 18 (line 2)", "not UTF-8")),
    Case("judging-alpha-zero", JUDGING, b"alpha: 0\n", ("references", "check", "--site", "local"),
         2, ("judging.yaml", "alpha: '0' must be a fraction in (0, 0.5)")),
    Case("validate-judging-unknown-key", JUDGING, b"kk: 5\n", ("validate", "--site", "local"),
         2, ("judging.yaml", "kk", "unknown setting")),
    # --- mpi-tuning.yaml: the same, though only one check reads it ----------------
    Case("tuning-setting-not-a-setting", TUNING, b"Allreduce: {setting: fast}\n",
         ("references", "check", "--site", "local"), 2,
         ("mpi-tuning.yaml", "Allreduce.setting", "hpcval tune collectives --write")),
    Case("validate-tuning-ranks-quoted", TUNING,
         b"Allreduce: {setting: '12:0-8;3:9-4096', ranks: '2', nodes: 1}\n",
         ("validate", "--site", "local"), 2,
         ("mpi-tuning.yaml", "Allreduce.ranks", "hpcval tune collectives --write")),
    # --- host-expectations.yaml -------------------------------------------------
    Case("host-non-utf8", HOST, b"smt_control: \"of\xfff\"\n",
         ("references", "check", "--site", "local"), 2,
         ("host-expectations.yaml", "byte offset 16", "not UTF-8")),
    Case("host-alias-bomb", HOST, _alias_bomb().replace(b"imb_pingpong_check:\n  '*':\n    "
                                                         b"lat_0B: [1, null, 0, us]\n", b""),
         ("references", "check", "--site", "local"), 2, ("host-expectations.yaml", "too large")),
    Case("host-unknown-setting", HOST, b"smt_contrl: 'off'\n",
         ("references", "check", "--site", "local"), 2,
         ("host-expectations.yaml", "smt_contrl", "unknown setting")),
    Case("host-min-not-number", HOST, b"net.core.busy_read: {min: lots}\n",
         ("references", "check", "--site", "local"), 2,
         ("host-expectations.yaml", "net.core.busy_read.min", "must be a number")),
    # --- command-line arguments ---------------------------------------------------
    Case("site-command-substitution", None, b"", ("validate", "--site", "$(touch INJECTED)"),
         2, ("--site", "not a site name")),
    Case("site-backticks", None, b"", ("references", "check", "--site", "`touch INJECTED`"),
         2, ("--site", "not a site name")),
    Case("site-semicolon", None, b"", ("validate", "--site", "local;touch INJECTED"),
         2, ("--site", "not a site name")),
    Case("site-space", None, b"", ("validate", "--site", "local x"), 2,
         ("--site", "not a site name")),
    Case("site-path", None, b"", ("validate", "--site", "../site-configs/local"), 2,
         ("--site", "not a site name")),
    Case("site-absolute-path", None, b"", ("report", "--site", "/etc"), 2,
         ("--site", "not a site name")),
    Case("lock-timeout-nan", None, b"", ("store", "rebuild", "--site", "local",
                                         "--lock-timeout", "nan"), 2,
         ("--lock-timeout", "'nan' is not a number of seconds")),
    Case("lock-timeout-negative", None, b"", ("validate", "--site", "local",
                                              "--lock-timeout", "-5"), 2,
         ("--lock-timeout", "'-5' is not a number of seconds")),
    Case("site-unknown", None, b"", ("validate", "--site", "nosuchsite"), 2,
         ("nosuchsite",)),
    Case("capture-tolerance-above-1", None, b"",
         ("references", "capture", "--site", "local", "--tolerance", "2"), 2,
         ("--tolerance", "between 0 and 1")),
    Case("capture-margin-with-tolerance", None, b"",
         ("references", "capture", "--site", "local", "--tolerance", "0.2", "--margin", "0.3"),
         2, ("--margin goes with --from-history",)),
    Case("history-accept-with-check", None, b"",
         ("history", "--site", "local", "--accept", "20260101T000000Z-000000", "--check", "x"),
         2, ("--accept/--reject mark a whole run",)),
    Case("capture-tolerance-negative", None, b"",
         ("references", "capture", "--site", "local", "--tolerance", "-0.1"), 2,
         ("--tolerance",)),
    Case("capture-missing-report", None, b"",
         ("references", "capture", "--site", "local", "--tolerance", "0.2", "nosuch.json"), 2,
         ("nosuch.json",)),
    Case("capture-garbage-report", "garbage.json", b"{not json",
         ("references", "capture", "--site", "local", "--tolerance", "0.2", "garbage.json"), 2,
         ("garbage.json",)),
    Case("report-wrong-shape", "shape.json", b'{"runs": 5, "session_info": []}',
         ("report", "--site", "local", "shape.json"), 2, ("shape.json",)),
    Case("compare-wrong-shape", "shape.json", b'[1, 2, 3]',
         ("compare", "--site", "local", "shape.json", "shape.json"), 2, ("shape.json",)),
    Case("report-non-utf8", "bad.json", b'{"runs": [\xff]}',
         ("report", "--site", "local", "bad.json"), 2, ("bad.json",)),
]


@pytest.fixture
def site(stored: Path) -> Iterator[Path]:
    """The stored checkout; the site's files restored after each case."""
    saved = {p: (stored / p).read_bytes() for p in (REFS, HOST)}
    yield stored
    for p, data in saved.items():
        (stored / p).write_bytes(data)
    (stored / JUDGING).unlink(missing_ok=True)
    (stored / TUNING).unlink(missing_ok=True)
    for extra in ("garbage.json", "shape.json", "bad.json"):
        (stored / extra).unlink(missing_ok=True)


#: Cases also run as a separate `hpcval` process (the rest go through
#: hpcval.cli.main in the test process: one Python start-up for all).
SUBPROCESS = {"site-command-substitution", "site-semicolon", "non-utf8-byte", "alias-bomb"}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(site: Path, case: Case, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> None:
    if case.file is not None:
        (site / case.file).write_bytes(case.content)
    before = tree_digest(site / "var")
    if case.name in SUBPROCESS:
        res = run(site, *case.args, timeout=120)
    else:
        res = run_inprocess(site, *case.args, monkeypatch=monkeypatch, capsys=capsys)
    assert_clean_failure(res, case.code, *case.names)
    assert tree_digest(site / "var") == before, "stored results changed"
    assert not (site / "INJECTED").exists() and not Path("INJECTED").exists()
    assert "+ " not in res.stdout or "reframe" not in res.stdout, "a benchmark ran"


def test_alias_bomb_fails_fast(site: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    """20 levels of 9-fold aliases (9^20 values) in under 9 KB: refused, not
    expanded (expanding it would not end)."""
    (site / REFS).write_bytes(_alias_bomb(20))
    assert len((site / REFS).read_bytes()) < 9_000
    res = run_inprocess(site, "references", "check", "--site", "local",
                        monkeypatch=monkeypatch, capsys=capsys)
    assert_clean_failure(res, 2, "references.yaml", "YAML too large")


def test_no_directory_for_unknown_site(stored: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A rejected --site creates nothing under var/."""
    before = sorted(p.name for p in (stored / "var").iterdir())
    for name in ("$(touch INJECTED)", "../x", "nosuchsite"):
        run_inprocess(stored, "validate", "--site", name, monkeypatch=monkeypatch,
                      capsys=capsys)
    assert sorted(p.name for p in (stored / "var").iterdir()) == before


def test_good_files_still_pass(site: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    """The corpus's good starting point is accepted (the cases fail for their fault)."""
    res = run_inprocess(site, "references", "check", "--site", "local",
                        monkeypatch=monkeypatch, capsys=capsys)
    assert res.returncode == 0, res.output


def test_reference_errors_found_at_run_setup_exit_2(site: Path) -> None:
    """What only the run can see (the value of an index attribute, here a
    ``cache`` with no references) is still wrong input: exit 2 naming file and
    key, before the benchmark runs."""
    (site / REFS).write_text(PINGPONG_OK.replace("  warm:", "  hot:"))
    before = tree_digest(site / "var" / "local" / "reports")
    res = run(site, "validate", "--site", "local", "--", "-c", str(CHECKS),
              "-n", "fake_imb_check.*mode=ok$")
    assert_clean_failure(res, 2, "references.yaml", "imb_pingpong_check",
                         "no reference for cache='warm'")
    # the run is kept (its report names the cause); nothing earlier changed
    after = tree_digest(site / "var" / "local" / "reports")
    assert after.items() >= before.items()


@pytest.mark.parametrize("args, names", [
    (("-n", "no_such_check"), ("-n no_such_check", "select none of the checks")),
    (("-t", "imb_pingpong_check"), ("-t imb_pingpong_check", "select none of the checks")),
    (("--no-such-option",), ("--no-such-option", "unrecognized arguments")),
], ids=["name-selects-nothing", "tag-selects-nothing", "unknown-option"])
def test_reframe_options_wrong_exit_2(site: Path, args: tuple[str, ...],
                                      names: tuple[str, ...]) -> None:
    """Options after ``--`` that ReFrame refuses, or that select no check
    (ReFrame then writes no run report), are wrong input: exit 2 naming them."""
    def stored() -> dict[str, str]:  # less the cache of the last site-files check
        return {k: v for k, v in tree_digest(site / "var").items()
                if not k.endswith("site-files.checked")}

    before = stored()
    res = run(site, "validate", "--site", "local", "--", "-c", str(CHECKS), *args)
    assert_clean_failure(res, 2, "ReFrame options after --", *names)
    assert stored() == before, "stored results changed"


@pytest.mark.parametrize("ceiling", ["'fast'", "float('nan')", "0"])
def test_bad_bandwidth_ceiling_exit_2(tmp_path: Path, ceiling: str) -> None:
    """A partition's ``extras.max_bandwidth_mbs`` that is no positive number
    is wrong input, found before the benchmark runs (a NaN ceiling let a
    bandwidth above any transport's through)."""
    root = make_checkout(tmp_path)
    config = root / "site-configs" / "local" / "config.py"
    config.write_text(config.read_text().replace(
        '"extras": partition_extras(SITE_DIR),',
        f'"extras": {{**partition_extras(SITE_DIR), "max_bandwidth_mbs": {ceiling}}},', 1))
    res = run(root, "validate", "--site", "local", "--", "-c", str(CHECKS),
              "-n", "fake_imb_check.*mode=above-ceiling$")
    assert_clean_failure(res, 2, "config.py", "partitions[default].extras.max_bandwidth_mbs",
                         "positive number")


_PROCESSOR = '"scheduler": "local",'
_EXTRAS = '"extras": partition_extras(SITE_DIR),'


def _processor(text: str) -> tuple[str, str]:
    return _PROCESSOR, f'{_PROCESSOR} "processor": {text},'


def _extra(text: str) -> tuple[str, str]:
    return _EXTRAS, f'"extras": {{**partition_extras(SITE_DIR), {text}}},'


_MPIRUN = ("site_configuration = {",
           'ENVIRONMENTS[0]["extras"]["mpirun"] = "/nonexistent/bin/mpirun"\n'
           "site_configuration = {")


@pytest.mark.parametrize("edit, env, args, code, names", [
    (_processor('{"num_cpus": 1000000}'), {}, (), 2, ("processor.num_cpus", "not a count")),
    (_processor(f'{{"num_cpus": {2 * (os.cpu_count() or 1)}}}'), {}, (), 2,
     ("processor.num_cpus", "this host")),
    (_processor('{"num_cpus": 0}'), {}, (), 2, ("processor.num_cpus", "not a count")),
    (_processor('{"num_cpus": -4}'), {}, (), 2, ("processor.num_cpus", "not a count")),
    (_processor('{"num_cpus": 1, "num_sockets": 0}'), {}, (), 2,
     ("processor.num_sockets", "not a count")),
    (_processor('{"num_cpus": 1, "num_sockets": 2}'), {}, (), 2,
     ("processor.num_sockets", "more than num_cpus")),
    (_processor('{"num_cpus": 1, "topology": {"caches": [{"type": "L3", "size": -1}]}}'),
     {}, (), 2, ("processor.topology.caches[0].size", "not a cache size")),
    (_extra('"mem_per_node": "lots"'), {}, (), 2, ("extras.mem_per_node", "not a size")),
    (_extra('"mem_per_node": 1'), {}, (), 2, ("extras.mem_per_node", "memory of a node")),
    (_extra('"budget": "huge"'), {}, (), 2, ("extras.budget", "not a budget")),
    (_extra('"memory_bw_mbs": -5'), {}, (), 2, ("extras.memory_bw_mbs", "positive number")),
    (_extra('"shared_fs_dir": "/nonexistent/shared"'), {}, (), 3,
     ("extras.shared_fs_dir", "not a directory")),
    (None, {"HPCVAL_BUDGET": "huge"}, (), 2, ("$HPCVAL_BUDGET", "not a budget")),
    (None, {}, ("-S", "budget=huge"), 2, ("-S budget=huge", "not a budget")),
    (None, {}, ("-S", "fake_imb_check.budget=huge"), 2,
     ("-S fake_imb_check.budget=huge", "not a budget")),
    (_MPIRUN, {}, (), 3, ("environments[", "extras.mpirun", "/nonexistent/bin/mpirun")),
], ids=["num_cpus-1000000", "num_cpus-above-host", "num_cpus-0", "num_cpus-negative",
        "sockets-0",
        "sockets-above-cpus", "cache-negative", "mem-not-a-size", "mem-1-byte",
        "extras-budget", "memory-ceiling-negative", "shared-fs-missing", "env-budget",
        "setvar-budget", "setvar-check-budget", "mpirun-missing"])
def test_site_values_checked_before_anything_runs(
        tmp_path: Path, edit: tuple[str, str] | None, env: dict[str, str],
        args: tuple[str, ...], code: int, names: tuple[str, ...]) -> None:
    """Every value of the site config a run sizes or launches with, and the
    budget from every source: exit 2 (3 for a missing tool) naming the file
    or source and the key, before the site lock, the store or a benchmark."""
    root = make_checkout(tmp_path)
    if edit is not None:
        config = root / "site-configs" / "local" / "config.py"
        text = config.read_text()
        assert edit[0] in text
        config.write_text(text.replace(edit[0], edit[1], 1))
    res = run(root, "validate", "--site", "local", "--", "-c", str(CHECKS),
              "-n", "fake_imb_check.*mode=ok$", *args, env=env)
    assert_clean_failure(res, code, *names)
    if edit is not None:
        assert "config.py" in res.error_line()
    assert "hpcval: run " not in res.stdout, res.stdout
    assert not (root / "var" / "local" / "reports").exists() or not list(
        (root / "var" / "local" / "reports").iterdir())


@pytest.mark.parametrize("argv", [("lab", "fabric", "200m"), ("lab", "fabric", "12.5m"),
                                  ("lab", "up", "--fabric", "200m"), ("lab", "fabric", "1g")])
def test_lab_fabric_takes_the_rates_the_lab_supports(argv: tuple[str, ...]) -> None:
    """A rate in Mbit/s (what the lab shapes links to) is taken as a profile;
    parsed only here: no lab is touched."""
    from hpcval.cli import build_parser

    args = build_parser().parse_args(list(argv))
    assert (getattr(args, "profile", None) or args.fabric) == argv[-1]


@pytest.mark.parametrize("rate", ["fast", "0m", "200", "1.5.0m"])
def test_lab_fabric_refuses_what_is_no_rate(rate: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Not a profile nor a rate: exit 2 at argument parsing, naming the value
    and the known profiles, before any lab is touched."""
    from hpcval.cli import build_parser

    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(["lab", "fabric", rate])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"unknown fabric profile '{rate}'" in err and "185m" in err
