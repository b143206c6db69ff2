"""``report`` and ``references capture`` judge only runs hpcval stored for the
site; ``report``, ``export``, ``trend`` and ``history`` used as a careless user
would: each case asserts the documented exit code, one line, no traceback,
and that nothing stored or published is lost (docs/errors.md, "Which runs
have a verdict"). Real ReFrame runs with the fake benchmark on the `local`
site; the cases of a module share one checkout and run in this order."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hpcval.run.procs import marked

from .conftest import (
    BIN,
    CHECKS,
    FAKE_IMB,
    OK_RUN,
    TRACEBACK,
    assert_clean_failure,
    make_checkout,
    needs_impi,
    run,
    tree_digest,
)

pytestmark = pytest.mark.integration

OK_SELECT = ["-c", str(CHECKS), "-n", "fake_imb_check.*mode=ok$"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout with one passing run stored and judged."""
    needs_impi()
    root = make_checkout(tmp_path_factory.mktemp("judged"))
    res = run(root, *OK_RUN)
    assert res.returncode == 0, res.output
    return root


def _var(root: Path) -> Path:
    return root / "var" / "local"


def _reframe(root: Path, *args: str) -> Path:
    """Plain ReFrame with the site's config, as the README offers it; returns
    the run report it wrote into the results store."""
    before = set((_var(root) / "reports").glob("*.json"))
    env = {**os.environ}
    env.pop("HPCVAL_VAR", None)
    env.pop("HPCVAL_RUN_ID", None)
    proc = subprocess.run([str(BIN / "reframe"), "-C", str(root / "site-configs" / "local" /
                                                           "config.py"), *OK_SELECT, *args],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (new,) = set((_var(root) / "reports").glob("*.json")) - before
    return new


def _stored_ids(root: Path) -> list[str]:
    res = run(root, "history", "--site", "local", "--json", "--last", "1000")
    assert res.returncode == 0, res.output
    return [r["run_id"] for r in json.loads(res.stdout)]


def _latest(root: Path) -> bytes:
    return (_var(root) / "html" / "latest.html").read_bytes()


def test_a_dry_run_is_refused_and_never_the_latest_run(site: Path) -> None:
    """`reframe ... --dry-run` with the site's config writes a report whose
    figures are all None into the store: `report` and `references capture`
    took it as the latest run (RESULT: PASS, exit 0)."""
    (stored,) = _stored_ids(site)
    latest = _latest(site)
    dry = _reframe(site, "--dry-run")
    try:
        res = run(site, "report", "--site", "local", str(dry))
        assert_clean_failure(res, 2, str(dry), "dry run")
        assert "RESULT:" not in res.stdout
        assert _latest(site) == latest and not (_var(site) / "html" / f"{dry.stem}.html").exists()
        res = run(site, "report", "--site", "local")
        assert res.returncode == 0, res.output
        assert f"(run {stored})" in res.stdout and "None" not in res.stdout
        assert f"passed over, not the latest run: {dry}: a dry run" in res.stderr
        res = run(site, "references", "capture", "--site", "local", "--tolerance", "0.2")
        assert res.returncode == 0 and f"run-report-{stored}.json" in res.stdout, res.output
        res = run(site, "references", "capture", "--site", "local", "--tolerance", "0.2",
                  "--write", str(dry))
        assert_clean_failure(res, 2, str(dry), "dry run")
    finally:
        dry.unlink()


def test_another_sites_run_report_is_refused(site: Path, tmp_path: Path) -> None:
    """The run report of another site (its ReFrame config is the lab's):
    judged against local's history it printed RESULT: PASS, exit 0, and
    replaced local's latest.html."""
    (stored,) = _stored_ids(site)
    data = json.loads((_var(site) / "reports" / f"run-report-{stored}.json").read_text())
    data["session_info"]["config_files"] = ["<builtin>",
                                            "/elsewhere/hpcval/site-configs/lab/config.py"]
    for tc in data["runs"][-1]["testcases"]:
        tc.update(system="lab", partition="compute")
    foreign = tmp_path / "run-report-20261124T101010Z-abcdef.json"
    foreign.write_text(json.dumps(data))
    before = tree_digest(_var(site))
    for args in (("report",), ("references", "capture", "--tolerance", "0.2")):
        res = run(site, *args, "--site", "local", str(foreign))
        assert_clean_failure(res, 2, str(foreign), "site 'lab'", "not of site 'local'")
        assert "RESULT:" not in res.stdout
    assert tree_digest(_var(site)) == before


def test_a_report_path_that_is_a_directory(site: Path) -> None:
    res = run(site, "report", "--site", "local", str(_var(site) / "reports"))
    assert_clean_failure(res, 2, str(_var(site) / "reports"), "a directory")


def test_a_run_id_that_does_not_exist(site: Path) -> None:
    before = tree_digest(_var(site))
    res = run(site, "report", "--site", "local", "20990101T000000Z-abcdef")
    assert_clean_failure(res, 2, "20990101T000000Z-abcdef", "not found", "hpcval history")
    assert tree_digest(_var(site)) == before


def test_export_trend_history_of_a_site_that_never_ran(site: Path) -> None:
    """A site with a config and no run yet: wrong input (exit 2, like
    `report`), not an environment fault (it was 3)."""
    import shutil

    shutil.copytree(site / "site-configs" / "local", site / "site-configs" / "fresh")
    try:
        for args in (("export",), ("trend",), ("history",),
                     ("references", "capture", "--from-history")):
            res = run(site, *args, "--site", "fresh")
            assert_clean_failure(res, 2, "no results store yet",
                                 "hpcval validate --site fresh")
        res = run(site, "report", "--site", "fresh")
        assert_clean_failure(res, 2, "hpcval validate --site fresh")
    finally:
        shutil.rmtree(site / "site-configs" / "fresh")


def test_an_output_that_is_a_directory(site: Path, tmp_path: Path) -> None:
    """`export -o DIR`, `trend --html DIR`: wrong input (exit 2), said before
    any work (it was exit 3, "Is a directory")."""
    for args in (("export", "-o", str(tmp_path)), ("trend", "--html", str(tmp_path))):
        res = run(site, *args, "--site", "local")
        assert_clean_failure(res, 2, str(tmp_path), "a directory")
    assert list(tmp_path.iterdir()) == []


def test_an_output_or_report_that_is_no_regular_file(site: Path, tmp_path: Path) -> None:
    """`export -o` or `trend --html` naming a device or a pipe (`/dev/stdout`,
    `/dev/full`): the temporary file was renamed over it (as root, over the
    device node); `report` of a pipe waited for ever (of /dev/zero: read until
    memory ran out). A FIFO stands in for the device here."""
    fifo = tmp_path / "collector.prom"
    os.mkfifo(fifo)
    for args, flag in ((("export", "-o", str(fifo)), "-o"),
                       (("trend", "--html", str(fifo)), "--html")):
        res = run(site, *args, "--site", "local", timeout=60)
        assert_clean_failure(res, 2, f"{flag} {fifo}", "not a regular file")
        assert fifo.is_fifo()
    res = run(site, "report", "--site", "local", str(fifo), timeout=60)
    assert_clean_failure(res, 2, str(fifo), "not a regular file")


def test_trend_and_history_of_a_figure_that_does_not_exist(site: Path) -> None:
    for args in (("trend", "--figure", "bw_3MiB"),
                 ("history", "--check", "fake_imb_check", "--figure", "bw_3MiB")):
        res = run(site, *args, "--site", "local")
        assert_clean_failure(res, 2, "--figure bw_3MiB")
    # an empty value is named as given (it was shown as `*`, "any")
    res = run(site, "trend", "--check", "", "--site", "local")
    assert_clean_failure(res, 2, "--check ''")


def test_from_history_write_names_the_backups(site: Path) -> None:
    """`references capture --from-history --write` replaced references.yaml
    saying only "wrote": where the old file went was not said."""
    refs = site / "site-configs" / "local" / "references.yaml"
    old = refs.read_bytes()
    try:
        res = run(site, "references", "capture", "--site", "local", "--from-history",
                  "--write")
        assert res.returncode == 0, res.output
        said = [ln for ln in res.stdout.splitlines()
                if ln.startswith("previous references.yaml kept as ")]
        assert said, res.stdout
        assert Path(said[0].removeprefix("previous references.yaml kept as ")).read_bytes() \
            == old
    finally:
        refs.write_bytes(old)  # as it was, for the cases after this one


def test_a_plain_reframe_run_and_an_orphaned_run_are_refused(site: Path) -> None:
    """A plain `reframe -r` run (never stored, never judged) and the same run
    once the next validation marked it orphaned: `report` printed RESULT:
    PASS / ORPHANED and exited 0, replacing latest.html."""
    from hpcval.run.verdicts import mark_orphaned
    from hpcval.site import Site

    latest = _latest(site)
    plain = _reframe(site, "-r")
    res = run(site, "report", "--site", "local", str(plain))
    assert_clean_failure(res, 2, str(plain), "never stored or judged")
    res = run(site, "report", "--site", "local")
    assert res.returncode == 0 and "never stored or judged" in res.stderr, res.output
    run_id = plain.stem.removeprefix("run-report-")
    mark_orphaned(Site.load("local", site), run_id)  # what the next validation does
    assert run_id in _stored_ids(site)  # stored as orphaned, never a baseline
    res = run(site, "report", "--site", "local", run_id)
    assert_clean_failure(res, 2, run_id, "orphaned")
    assert "RESULT:" not in res.stdout
    assert _latest(site) == latest


def test_every_case_skipped_is_nothing_validated(site: Path, tmp_path: Path) -> None:
    """A validation whose every case skipped itself printed RESULT: PASS,
    exit 0; `report` of an older run then replaced latest.html."""
    checks = tmp_path / "skipping_checks.py"
    checks.write_text(SKIPPING_CHECK.format(fake=FAKE_IMB))
    res = run(site, "validate", "--site", "local", "--", "-c", str(checks),
              "-n", "fake_skipped_check")
    assert res.returncode == 1, res.output
    assert TRACEBACK not in res.output
    assert "RESULT: NOTHING VALIDATED  every one of the" in res.stdout, res.stdout
    assert "no accelerator of the kind this check needs" in res.stdout
    assert "RESULT: PASS" not in res.stdout
    skipped_page = _latest(site)
    res = run(site, "history", "--site", "local", "--json", "--last", "1")
    assert [r["result"] for r in json.loads(res.stdout)] == ["skipped"], res.output
    res = run(site, "export", "--site", "local")
    assert any(ln.startswith("hpcval_run_result{") and 'result="skipped"' in ln
               and float(ln.rsplit(" ", 1)[1]) == 1 for ln in res.stdout.splitlines()), res.stdout
    first = _stored_ids(site)[0]
    res = run(site, "report", "--site", "local")
    assert res.returncode == 1 and "NOTHING VALIDATED" in res.stdout, res.output
    res = run(site, "report", "--site", "local", first)
    assert res.returncode == 0 and f"(run {first})" in res.stdout, res.output
    assert _latest(site) == skipped_page  # the latest run's page stays the latest
    assert (_var(site) / "html" / f"run-report-{first}.html").is_file()


SKIPPING_CHECK = '''
import reframe as rfm
from reframe.core.builtins import parameter, run_after

from hpcval.rfm.imb import ImbPingPongBase


@rfm.simple_test
class fake_skipped_check(ImbPingPongBase):
    """Skips itself on every partition, as a GPU check does without a GPU."""

    reference_entry = "imb_pingpong_check"
    program = "{fake}"
    samples = 2
    valid_systems = ["local"]
    valid_prog_environs = ["+impi +imb"]
    cache = parameter(inherit_params=True, filter_params=lambda values: values[:1])

    @run_after("setup")
    def no_device(self) -> None:
        self.skip("no accelerator of the kind this check needs on this partition")
'''


def test_validate_record_names_the_backups(site: Path) -> None:
    """`validate --record` over existing references said "wrote" only."""
    refs = site / "site-configs" / "local" / "references.yaml"
    old = refs.read_bytes()
    res = run(site, "validate", "--site", "local", "--record", "--", *OK_SELECT)
    assert res.returncode == 0, res.output
    said = [ln for ln in res.stdout.splitlines()
            if ln.startswith("previous references.yaml kept as ")]
    assert said, res.stdout
    assert Path(said[0].removeprefix("previous references.yaml kept as ")).read_bytes() == old


def test_report_of_an_interrupted_run_is_not_a_pass(tmp_path: Path) -> None:
    """A run stopped by SIGTERM before its case finished: `report` printed
    RESULT: INTERRUPTED and exited 0."""
    needs_impi()
    root = make_checkout(tmp_path)
    env = {**os.environ, "HPCVAL_ROOT": str(root)}
    env.pop("HPCVAL_VAR", None)
    log = tmp_path / "validate.out"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(BIN / "hpcval"), "validate", "--site", "local", "--",
                                 "-c", str(CHECKS), "-n", "fake_orphan_check"], cwd=root,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        record = root / "var" / "local" / "run.json"
        while time.monotonic() < deadline:
            try:
                run_id = json.loads(record.read_text())["run_id"]
                if any(Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0]
                       .endswith(b"sleep") for p in marked(run_id)):
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.3)
        else:
            pytest.fail("the benchmark never started")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, log.read_text()
    res = run(root, "report", "--site", "local")
    assert res.returncode == 1, res.output
    assert "RESULT: INTERRUPTED" in res.stdout and TRACEBACK not in res.output
