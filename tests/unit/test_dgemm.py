"""DGEMM: the peak table, the runner's peak on a recorded /sys and /proc, its
sizing, its output's parser (on real runner output) and the runner itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.core.errors import ParseError
from hpcval.node import dgemm, sizing
from hpcval.parsers.dgemm import parse_dgemm

DATA = Path(__file__).resolve().parents[1] / "data" / "dgemm"


@pytest.mark.parametrize(("flags", "vendor", "family", "want"), [
    ({"sse2", "avx", "fma", "avx2", "avx512f"}, "GenuineIntel", 6, 32),
    ({"sse2", "avx", "fma", "avx2", "avx512f"}, "AuthenticAMD", 0x1A, 32),  # Zen 5
    ({"sse2", "avx", "fma", "avx2", "avx512f"}, "AuthenticAMD", 0x19, 16),  # Zen 4
    ({"sse2", "avx", "fma", "avx2"}, "AuthenticAMD", 0x17, 16),
    ({"sse2", "avx"}, "GenuineIntel", 6, 8),
    ({"sse2"}, "GenuineIntel", 6, 4),
    ({"fpu"}, "", None, 2),
])
def test_flops_per_cycle_table(flags: set[str], vendor: str, family: int | None,
                               want: int) -> None:
    assert dgemm.flops_per_cycle(flags, vendor, family)[0] == want


def _fake_node(root: Path, flags: str, family: int, cpufreq: dict[str, int] | None,
               cores: list[tuple[int, int]]) -> None:
    lines = []
    for cpu, (pkg, core) in enumerate(cores):
        lines += [f"processor\t: {cpu}", "vendor_id\t: GenuineIntel", f"cpu family\t: {family}",
                  "cpu MHz\t\t: 1200.000", f"flags\t\t: {flags}", ""]
        topo = root / f"sys/devices/system/cpu/cpu{cpu}/topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{pkg}\n")
        (topo / "core_id").write_text(f"{core}\n")
        for name, khz in (cpufreq or {}).items():
            freq = topo.parent / "cpufreq"
            freq.mkdir(exist_ok=True)
            (freq / name).write_text(f"{khz}\n")
    (root / "proc").mkdir()
    (root / "proc/cpuinfo").write_text("\n".join(lines))


def test_peak_counts_physical_cores_at_the_base_clock(tmp_path: Path) -> None:
    # 2 sockets x 2 cores x 2 SMT threads; base 2.0 GHz, max 3.5 GHz
    cores = [(p, c) for _ in range(2) for p in range(2) for c in range(2)]
    _fake_node(tmp_path, "fpu sse2 avx fma avx2 avx512f", 6,
               {"base_frequency": 2_000_000, "cpuinfo_max_freq": 3_500_000}, cores)
    peak = dgemm.node_peak(range(8), tmp_path)
    assert (peak.cores, peak.mhz, peak.flops_per_cycle) == (4, 2000.0, 32)
    assert peak.gflops == pytest.approx(4 * 2.0 * 32)
    assert peak.mhz_source == "cpufreq base_frequency"
    # the cores a job is given: one SMT pair is one core
    assert dgemm.node_peak([0, 4], tmp_path).cores == 1


def test_peak_without_cpufreq_reads_cpuinfo_and_says_so(tmp_path: Path) -> None:
    _fake_node(tmp_path, "fpu sse2 avx fma avx2", 6, None, [(0, 0), (0, 1)])
    peak = dgemm.node_peak([0, 1], tmp_path)
    assert peak.gflops == pytest.approx(2 * 1.2 * 16)
    assert "cpuinfo cpu MHz" in peak.describe()
    assert dgemm.node_peak([0, 1], tmp_path, flops_override=8).gflops == \
        pytest.approx(2 * 1.2 * 8)


def test_peak_unknown_without_flags(tmp_path: Path) -> None:
    assert dgemm.node_peak([0], tmp_path).gflops is None


def test_sizing_one_second_at_peak_within_memory() -> None:
    node = sizing.Node(2, None, 16 * sizing.GIB)
    size = sizing.dgemm(node, "quick", 166.0)
    n = size.params["n"]
    assert n % sizing.DGEMM_STEP == 0
    assert 0.5 < 2 * n ** 3 / 166e9 <= 1.0
    assert sizing.dgemm(node, "full", 166.0).params["n"] > n
    small = sizing.dgemm(sizing.Node(2, None, 512 * sizing.MIB), "full", 5000.0)
    assert 24 * small.params["n"] ** 2 <= 256 * sizing.MIB
    assert "bounded by" in small.reason
    with pytest.raises(sizing.SizingError, match="exceed"):
        sizing.dgemm(sizing.Node(2, None, 32 * sizing.MIB), "quick", 166.0)


def test_parser_reads_real_runner_output() -> None:
    r = parse_dgemm((DATA / "numpy-2core-epyc.out").read_text())
    assert r.n == 4352 and r.threads == 2 and r.blas.startswith("numpy ")
    assert r.peak_gflops == pytest.approx(166.15)
    assert len(r.gflops) == 5 and max(r.gflops) == pytest.approx(54.744)
    assert r.share_of_peak == pytest.approx(0.329)
    assert r.shares()[1] == pytest.approx(54.744 / 166.15)
    v = parse_dgemm((DATA / "numpy-2core-epyc-validate.out").read_text())
    assert len(v.gflops) == 5 and v.size == "given (--n)"


@pytest.mark.parametrize(("cut", "match"), [
    (lambda t: t.replace("# hpcval dgemm\n", ""), "no '# hpcval dgemm'"),
    (lambda t: t.split("sample 3")[0], "cut short"),
    (lambda t: t.replace("49.574 GFLOP/s", "x GFLOP/s"), "cut or not numeric"),
    (lambda t: t + t, "second run"),
    (lambda t: "\n".join(ln for ln in t.splitlines() if not ln.startswith("sample")) + "\n",
     "no sample"),
])
def test_parser_refuses_broken_output(cut, match: str) -> None:  # type: ignore[no-untyped-def]
    text = (DATA / "numpy-2core-epyc.out").read_text()
    with pytest.raises(ParseError, match=match):
        parse_dgemm(cut(text))


def test_runner_output_parses(capsys: pytest.CaptureFixture[str]) -> None:
    assert dgemm.main(["--n", "128", "--samples", "2"]) == 0
    r = parse_dgemm(capsys.readouterr().out)
    assert r.n == 128 and len(r.gflops) == 2 and all(g > 0 for g in r.gflops)


def test_runner_refuses_a_library_without_cblas(capsys: pytest.CaptureFixture[str]) -> None:
    libc = "libc.so.6"
    assert dgemm.main(["--n", "128", "--samples", "1", "--blas-lib", libc]) == 3
    assert "exports no cblas_dgemm" in capsys.readouterr().err


DEBIAN_OPENBLAS = Path("/usr/lib/x86_64-linux-gnu/libopenblas.so.0")


@pytest.mark.skipif(not DEBIAN_OPENBLAS.exists(),
                    reason="Debian's OpenBLAS (libopenblas0-pthread: make system-deps)")
def test_runner_through_a_cblas_library(capsys: pytest.CaptureFixture[str]) -> None:
    """--blas-lib: a real CBLAS called on numpy's arrays, its product checked."""
    assert dgemm.main(["--n", "256", "--samples", "2", "--blas-lib", str(DEBIAN_OPENBLAS)]) == 0
    r = parse_dgemm(capsys.readouterr().out)
    assert r.blas.startswith("libopenblas.so.0 (cblas_dgemm") and len(r.gflops) == 2
