"""A check's references (:mod:`hpcval.rfm.references`), function by function."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from hpcval.rfm import references

REFS = """
x_check:
  $index: [$environ, size]
  impi:
    4:
      bw: [100, -0.1, null, MB/s]
"""


class _Base:
    """The mixin whose loaded subclasses a references file may name."""


class x_check(_Base):  # noqa: N801 - named as a check
    reference_entry = None
    size = 4

    def __init__(self, site: Path) -> None:
        self.prefix = str(site)
        self.current_system = SimpleNamespace(name="s")
        self.current_partition = SimpleNamespace(
            name="p", fullname="s:p", extras={"site_dir": str(site)},
            processor=SimpleNamespace(num_cpus=8))
        self.current_environ = SimpleNamespace(name="impi")
        self.perf_variables = {"bw": SimpleNamespace(unit="MB/s")}
        self.reference = {}

    def is_dry_run(self) -> bool:
        return False


def _site(tmp_path: Path) -> Path:
    """A site directory, ``site-configs/<name>`` of a checkout."""
    site = tmp_path / "site-configs" / "demo"
    site.mkdir(parents=True, exist_ok=True)
    return site


def test_index_keys_read_the_test(tmp_path: Path) -> None:
    test = x_check(_site(tmp_path))
    assert references.attribute(test, "$system") == "s"
    assert references.attribute(test, "$partition") == "s:p"
    assert references.attribute(test, "$environ") == "impi"
    assert references.attribute(test, "$processor.num_cpus") == 8
    assert references.attribute(test, "size") == 4


def test_references_become_reframes_and_are_checked(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(references.RECORD_ENV, raising=False)
    (_site(tmp_path) / "references.yaml").write_text(REFS)
    test = x_check(_site(tmp_path))
    references.apply(test, _Base)
    assert test.reference == {"*": {"bw": (100, -0.1, None, "MB/s")}}
    references.check_reported(test)
    test.perf_variables = {"bw": SimpleNamespace(unit="GB/s")}
    with pytest.raises(references.ReferencesFailure, match="GB/s"):
        references.check_reported(test)


def test_a_missing_entry_fails_and_a_recording_run_needs_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(references.RECORD_ENV, raising=False)
    (_site(tmp_path) / "references.yaml").write_text(
        "ior_check:\n  '*':\n    bw: [1, -0.1, null, MB/s]\n")
    with pytest.raises(references.ReferencesFailure, match="no references for check 'x_check'"):
        references.apply(x_check(_site(tmp_path)), _Base)
    monkeypatch.setenv(references.RECORD_ENV, "1")
    test = x_check(_site(tmp_path))
    references.apply(test, _Base)
    assert test.reference == {} and test._hpcval_refs == {}
