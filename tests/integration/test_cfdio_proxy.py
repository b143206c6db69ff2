"""Build and run the cfdio proxy for real: every strategy writes the same bytes,
and a full file system makes it fail cleanly. Skipped where no MPI is present."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcval.parsers.cfdio import STRATEGIES, parse_cfdio

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "proxies" / "cfdio"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    prefix = Path(sys.prefix)
    if (prefix / "bin" / "mpicc").exists() and (prefix / "include" / "mpi.h").exists():
        lib = str(prefix / "lib")
        env.update(I_MPI_ROOT=str(prefix), FI_PROVIDER_PATH=lib,
                   PATH=f"{prefix / 'bin'}:{env.get('PATH', '')}",
                   LD_LIBRARY_PATH=f"{lib}:{env.get('LD_LIBRARY_PATH', '')}")
    return env


@pytest.fixture(scope="module")
def cfdio(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    env = _env()
    if not shutil.which("mpicc", path=env["PATH"]) or not shutil.which("mpirun",
                                                                       path=env["PATH"]):
        pytest.skip("no mpicc/mpirun on PATH: cannot build and run the cfdio proxy")
    build = tmp_path_factory.mktemp("cfdio-build")
    shutil.copy(SRC / "cfdio.c", build)
    shutil.copy(SRC / "Makefile", build)
    subprocess.run(["make", "-C", str(build)], env=env, check=True, capture_output=True)
    return build / "cfdio", env


def _run(cfdio: tuple[Path, dict[str, str]], *args: str) -> subprocess.CompletedProcess:
    exe, env = cfdio
    return subprocess.run(["mpirun", "-n", "2", str(exe), *args], env=env, text=True,
                          capture_output=True, timeout=120)


def test_strategies_write_identical_files(cfdio, tmp_path: Path) -> None:
    digests = {}
    sums = set()
    for s in STRATEGIES:
        out = tmp_path / s
        out.mkdir()
        p = _run(cfdio, "--strategy", s, "--local", "12", "10", "8", "--steps", "4",
                 "--every", "2", "--dir", str(out), "--keep")
        assert p.returncode == 0, p.stderr
        r = parse_cfdio(p.stdout)
        sums.add(r["checksum"])
        files = sorted(out.iterdir())
        if s == "none":
            assert files == []
            continue
        assert [f.name for f in files] == ["cfdio_step000002.dat", "cfdio_step000004.dat"]
        gbytes = 24 * 10 * 8 * 8  # MPI_Dims_create(2, 3) splits the first dimension
        assert all(f.stat().st_size == gbytes for f in files)
        digests[s] = files[-1].read_bytes()
    assert len(sums) == 1
    assert len(set(digests.values())) == 1


def test_files_removed_without_keep(cfdio, tmp_path: Path) -> None:
    p = _run(cfdio, "--strategy", "per-rank-then-gather", "--local", "8", "8", "8",
             "--steps", "2", "--every", "1", "--dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert parse_cfdio(p.stdout)["outputs"] == 2
    assert list(tmp_path.iterdir()) == []


def test_triad_mode(cfdio) -> None:
    p = _run(cfdio, "--mode", "triad", "--triad-n", "100000", "--reps", "2")
    assert p.returncode == 0, p.stderr
    assert parse_cfdio(p.stdout)["triad_MBs"] > 0


def test_unwritable_directory_fails_cleanly(cfdio, tmp_path: Path) -> None:
    missing = tmp_path / "does-not-exist"
    p = _run(cfdio, "--strategy", "gather-to-root", "--local", "8", "8", "8", "--steps", "1",
             "--every", "1", "--dir", str(missing))
    assert p.returncode != 0
    assert str(missing) in p.stderr and "errno 2" in p.stderr


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "none"])
def test_full_disk_fails_and_leaves_nothing(cfdio, tiny_fs, strategy: str) -> None:
    tiny = tiny_fs("64k")
    p = _run(cfdio, "--strategy", strategy, "--local", "32", "32", "32", "--steps", "1",
             "--every", "1", "--dir", str(tiny))
    assert p.returncode != 0
    assert "No space left on device" in p.stderr
    assert str(tiny) in p.stderr
    assert "CFDIO" not in p.stdout
    assert list(tiny.iterdir()) == []


def test_stencil_with_triad_reports_fraction(cfdio) -> None:
    p = _run(cfdio, "--local", "16", "16", "16", "--steps", "2", "--with-triad",
             "--triad-n", "100000", "--reps", "2")
    assert p.returncode == 0, p.stderr
    r = parse_cfdio(p.stdout)
    assert r["triad_MBs"] > 0 and r["stencil_fraction"] > 0


def test_read_mode_reads_back_and_removes(cfdio, tmp_path: Path) -> None:
    p = _run(cfdio, "--mode", "read", "--read-mb", "2", "--dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    r = parse_cfdio(p.stdout)
    assert r["readers"] == 2 and r["bytes_per_reader"] == 2 << 20
    assert len(r["reader_MBs"]) == 2 and r["verified"] == 1
    assert list(tmp_path.iterdir()) == []
    kept = _run(cfdio, "--mode", "read", "--read-mb", "1", "--dir", str(tmp_path), "--keep")
    assert kept.returncode == 0, kept.stderr
    assert sorted(f.name for f in tmp_path.iterdir()) == ["cfdio_read00000.dat",
                                                          "cfdio_read00001.dat"]
    assert all(f.stat().st_size == 1 << 20 for f in tmp_path.iterdir())


def test_read_mode_in_missing_directory_fails(cfdio, tmp_path: Path) -> None:
    p = _run(cfdio, "--mode", "read", "--read-mb", "1", "--dir", str(tmp_path / "nope"))
    assert p.returncode != 0
    assert "cannot create" in p.stderr and "CFDIO" not in p.stdout


def test_read_mode_on_full_disk_fails_and_leaves_nothing(cfdio, tiny_fs) -> None:
    tiny = tiny_fs("1m")
    p = _run(cfdio, "--mode", "read", "--read-mb", "4", "--dir", str(tiny))
    assert p.returncode != 0
    assert "No space left on device" in p.stderr and str(tiny) in p.stderr
    assert list(tiny.iterdir()) == []
