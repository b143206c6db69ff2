"""Program lookup (:mod:`hpcval.rfm.programs`): the Spack build first."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from hpcval.rfm import programs


def _test(spack_package: str = "", partition_extras: dict | None = None,
          **extras: object) -> SimpleNamespace:
    return SimpleNamespace(spack_package=spack_package, mpi_stack="unknown", software_spec="",
                           site_provenance={},
                           current_environ=SimpleNamespace(name="impi", extras=extras),
                           current_partition=SimpleNamespace(extras=partition_extras or {}))


SPACK = {"ior": {"prefix": "/opt/ior", "spec": "ior@3.3.0 ^intel-mpi"}}


def test_the_spack_build_of_the_environment() -> None:
    assert programs.spack_prefix(_test("ior", spack=SPACK)) == "/opt/ior"
    assert programs.spack_prefix(_test("imb", spack=SPACK)) is None
    assert programs.spack_prefix(_test("imb", spack=SPACK), "ior") == "/opt/ior"


def test_the_stack_and_spec_are_recorded() -> None:
    test = _test("ior", spack=SPACK, mpi_stack="intel-mpi", spec="env-spec")
    programs.record_stack(test)
    assert (test.mpi_stack, test.software_spec) == ("intel-mpi", "ior@3.3.0 ^intel-mpi")
    plain = _test(spec="env-spec")
    programs.record_stack(plain)
    assert (plain.mpi_stack, plain.software_spec) == ("unknown", "env-spec")
    assert plain.site_provenance == {}
    lab = _test(partition_extras={"provenance": {"fabric": {"link": "200mbit"}}})
    programs.record_stack(lab)
    assert lab.site_provenance == {"fabric": {"link": "200mbit"}}


def test_a_program_is_found_in_the_spack_prefix_first(tmp_path: Path) -> None:
    exe = tmp_path / "libexec" / "osu_bw"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert programs.locate_program("osu_bw", spack_prefix=str(tmp_path)) == (
        str(exe), f"the environment's Spack build ({tmp_path})")
