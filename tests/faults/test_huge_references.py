"""A huge site YAML file is refused in seconds, for the bound it is over: by
its size before a byte is parsed, by its count of values from the parser's
events before anything is composed (:mod:`hpcval.core.yamlio`). A 26 MB
references file (40,000 comment lines, 100,000 keys) was composed whole, for
minutes and gigabytes, then refused for aliases it does not have."""

from __future__ import annotations

import resource
import time
import tracemalloc
from pathlib import Path

import pytest

from hpcval.core import yamlio

from .conftest import assert_clean_failure, make_checkout, run, run_inprocess

pytestmark = pytest.mark.integration

REFS = "site-configs/local/references.yaml"
HOST = "site-configs/local/host-expectations.yaml"


def _huge(comments: int, keys: int, width: int = 600) -> bytes:
    """*comments* comment lines of *width* characters, then one check entry
    with *keys* references."""
    head = ("# " + "x" * width + "\n") * comments
    body = "".join(f"    k{i:06d}: [1.0, null, 0.1, us]\n" for i in range(keys))
    return (head + "imb_pingpong_check:\n  '*':\n" + body).encode()


@pytest.fixture
def never_composed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Composing a document fails the test: the refusal must come before it."""
    def compose(self: object) -> None:
        raise AssertionError("the file was composed before it was refused")

    monkeypatch.setattr(yamlio._BoundedLoader, "get_single_node", compose)


def _refused(root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
             *args: str) -> tuple[object, float, int]:
    """The command in this process, with its CPU seconds and peak of Python
    memory (tracemalloc)."""
    tracemalloc.start()
    cpu = time.process_time()
    try:
        res = run_inprocess(root, *args, monkeypatch=monkeypatch, capsys=capsys)
        return res, time.process_time() - cpu, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_26_mb_references_refused_by_size(tmp_path: Path, never_composed: None,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    root = make_checkout(tmp_path)
    (root / REFS).write_bytes(_huge(40_000, 100_000))
    assert (root / REFS).stat().st_size > 25_000_000
    res, cpu, peak = _refused(root, monkeypatch, capsys, "references", "check", "--site",
                              "local")
    assert_clean_failure(res, 2, "references.yaml", "26.", "MiB", "larger than the 4.0 MiB")
    assert "alias" not in res.error_line()
    assert cpu < 5, f"{cpu:.1f} s of CPU"
    assert peak < 200 << 20, f"{peak >> 20} MiB at peak"


def test_100000_keys_refused_by_their_count(tmp_path: Path, never_composed: None,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Under the size bound (1.2 MiB) but over the values one: refused from the
    parser's events, naming values as written, not aliases."""
    root = make_checkout(tmp_path)
    data = _huge(0, 100_000).replace(b"[1.0, null, 0.1, us]", b"1")
    assert len(data) < yamlio.MAX_YAML_BYTES
    (root / REFS).write_bytes(data)
    res, cpu, peak = _refused(root, monkeypatch, capsys, "references", "check", "--site",
                              "local")
    assert_clean_failure(res, 2, "references.yaml", "more than 100000 values", "as written")
    assert "alias" not in res.error_line()
    assert cpu < 5, f"{cpu:.1f} s of CPU"
    assert peak < 200 << 20, f"{peak >> 20} MiB at peak"


def test_huge_host_expectations_refused_by_size(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Every reader of a site's YAML stands on the same bounds."""
    root = make_checkout(tmp_path)
    (root / HOST).write_bytes(b"# " + b"x" * (5 << 20) + b"\nsysctl: {}\n")
    res = run_inprocess(root, "validate", "--site", "local", monkeypatch=monkeypatch,
                        capsys=capsys)
    assert_clean_failure(res, 2, "host-expectations.yaml", "larger than the 4.0 MiB")


def test_validate_refuses_it_before_anything_runs(tmp_path: Path) -> None:
    """Through the command a scheduled run uses: exit 2 before the site lock
    or a benchmark, in seconds (the process's own CPU time, /usr/bin/time's
    figure, is in the notes)."""
    root = make_checkout(tmp_path)
    (root / REFS).write_bytes(_huge(40_000, 100_000))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = run(root, "validate", "--site", "local", timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert_clean_failure(res, 2, "references.yaml", "larger than the 4.0 MiB")
    assert "hpcval: run " not in res.stdout
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert cpu < 5, f"{cpu:.1f} s of CPU, Python's start included"
