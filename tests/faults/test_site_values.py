"""Site values checked wherever they are used: ``hpcval validate`` refuses a
site config value no machine has before anything runs (exit 2), and plain
``reframe -C site-configs/<site>/config.py`` (which runs no ``hpcval
validate``) fails every check on that partition in its setup, with the same
line as the reason, before any launch (one function checks both paths:
:mod:`hpcval.rfm.sitevalues`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .conftest import BIN, CHECKS, TRACEBACK, assert_clean_failure, make_checkout, needs_impi, run

pytestmark = pytest.mark.integration

_PROCESSOR = '"scheduler": "local",'
_EXTRAS = '"extras": partition_extras(SITE_DIR),'
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def _caches(*entries: tuple[str, int]) -> str:
    caches = ", ".join(f'{{"type": "{kind}", "size": {size}}}' for kind, size in entries)
    return f'{{"num_cpus": 1, "topology": {{"caches": [{caches}]}}}}'


def _edit(root: Path, processor: str | None = None, extras: str | None = None) -> Path:
    config = root / "site-configs" / "local" / "config.py"
    text = config.read_text()
    if processor is not None:
        assert _PROCESSOR in text
        text = text.replace(_PROCESSOR, f"{_PROCESSOR} \"processor\": {processor},", 1)
    if extras is not None:
        assert _EXTRAS in text
        text = text.replace(_EXTRAS, f'"extras": {{**partition_extras(SITE_DIR), {extras}}},', 1)
    config.write_text(text)
    return config


def _host_llc() -> int | None:
    from hpcval.node import topology

    return topology.this_host().llc_bytes


#: (processor, extras, the key named, what the line says)
CASES = {
    "num_cpus-1000000": ('{"num_cpus": 1000000}', None, "processor.num_cpus", "not a count"),
    "l3-1-byte": (_caches(("L1", 32 * KIB), ("L3", 1)), None,
                  "processor.topology.caches[1].size", "not a cache size"),
    "l3-1-petabyte": (_caches(("L1", 32 * KIB), ("L3", 1 << 50)), None,
                      "processor.topology.caches[1].size", "not a cache size"),
    "l1-only": (_caches(("L1", 32 * KIB)), None, "processor.topology.caches",
                "less than any node has"),
    "llc-above-memory": (_caches(("L3", 2 * GIB)), '"mem_per_node": "1GiB"',
                         "processor.topology.caches", "the node's memory"),
    "llc-below-this-host": (_caches(("L3", 256 * KIB)), None, "processor.topology.caches",
                            "this host"),
}


def _case(name: str) -> tuple[str, str | None, str, str]:
    if name == "llc-below-this-host":
        llc = _host_llc()
        if not llc or llc <= 256 * KIB:
            pytest.skip("this host's last-level cache is not detected above 256 KiB")
    return CASES[name]


@pytest.mark.parametrize("name", [n for n in CASES if n != "num_cpus-1000000"])
def test_validate_refuses_a_site_value_no_machine_has(tmp_path: Path, name: str) -> None:
    """Exit 2 naming the file and the key, before the site lock, the store or a
    benchmark: a last-level cache of 1 B sized the triad into the cache (it
    passed at 48.5 GB/s), one of 1 PB made it skip itself (the run passed).
    (``num_cpus`` 1000000 is test_bad_inputs.py's.)"""
    processor, extras, key, says = _case(name)
    root = make_checkout(tmp_path)
    _edit(root, processor, extras)
    res = run(root, "validate", "--site", "local", "--", "-c", str(CHECKS),
              "-n", "fake_imb_check.*mode=ok$")
    assert_clean_failure(res, 2, "config.py", key, says)
    assert "hpcval: run " not in res.stdout, res.stdout
    assert not (root / "var" / "local" / "reports").exists() or not list(
        (root / "var" / "local" / "reports").iterdir())


def _plain_reframe(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HPCVAL_ROOT": str(root)}
    env.pop("HPCVAL_VAR", None)
    return subprocess.run(
        [str(BIN / "reframe"), "-C", str(root / "site-configs" / "local" / "config.py"),
         "-c", str(CHECKS), "-n", "fake_imb_check.*mode=ok$", "-r", *args],
        cwd=root, env=env, text=True, capture_output=True, timeout=300)


@pytest.mark.parametrize("name", ["num_cpus-1000000", "l3-1-byte", "l3-1-petabyte",
                                  "llc-below-this-host"])
def test_plain_reframe_fails_the_check_in_its_setup(tmp_path: Path, name: str) -> None:
    """The same values through plain ReFrame: the check fails in its setup
    with the line ``hpcval validate`` prints (site config and key), and
    nothing is launched (no ``mpirun -np 1000000``, no job script)."""
    needs_impi()
    processor, extras, key, says = _case(name)
    root = make_checkout(tmp_path)
    config = _edit(root, processor, extras)
    proc = _plain_reframe(root)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert TRACEBACK not in out, out[-3000:]
    assert "Failing phase: setup" in out, out[-3000:]
    reason = next(ln for ln in out.splitlines() if "* Reason:" in ln)
    assert f"{config}: systems[local].partitions[default].{key}" in reason, reason
    assert says in reason, reason
    assert "1000000" not in out.replace(reason, ""), "the count reached a launch"
    stage = root / "var" / "local" / "stage"
    assert not list(stage.rglob("rfm_job.sh")), "a job script was written"


def test_plain_reframe_still_runs_a_sound_site(tmp_path: Path) -> None:
    """The control: the site config as shipped passes its setup and runs."""
    needs_impi()
    root = make_checkout(tmp_path)
    proc = _plain_reframe(root)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


def test_a_key_reframe_refuses_is_one_line(tmp_path: Path) -> None:
    """``processor.num_cores`` (docs/errors.md listed it; ReFrame's schema has
    no such key): exit 2 in one line naming the file, the key and where it is,
    not the schema and the instance printed over twenty lines."""
    root = make_checkout(tmp_path)
    _edit(root, '{"num_cpus": 1, "num_cores": 1}')
    res = run(root, "validate", "--site", "local", "--", "-c", str(CHECKS),
              "-n", "fake_imb_check.*mode=ok$")
    assert_clean_failure(res, 2, "config.py", "'num_cores' was unexpected",
                         "systems[0].partitions[0].processor")
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
