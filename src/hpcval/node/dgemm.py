"""DGEMM on one node: GFLOP/s per sample, and the node's computed peak.

``python -m hpcval.node.dgemm [--n N] [--samples S] [--blas-lib LIB] [--json]``
multiplies two ``n x n`` matrices of doubles (``C = A B``, 2 n^3 FLOPs) ``S``
times on the cores this process may run on (``os.sched_getaffinity``: all of
the node's, or those its job was given), after one warm-up multiply, and
prints each sample's GFLOP/s, the BLAS that ran, and the node's computed peak:

    peak = cores x frequency x double-precision FLOPs per cycle per core

* **cores**: the physical cores among the CPUs it may run on (SMT siblings
  share a core's FMA units), from ``/sys/devices/system/cpu/cpu*/topology``;
  the CPU count where that is unreadable.
* **frequency**: ``base_frequency`` of cpufreq (the nominal clock, as HPL's
  Rpeak counts it), else ``cpuinfo_max_freq``, else the mean ``cpu MHz`` of
  ``/proc/cpuinfo`` (a virtual machine often has no cpufreq); the source is
  reported with the peak.
* **FLOPs per cycle**: from the CPU flags, :data:`FLOPS_TABLE` (the first row
  whose flag the CPU has), with the exceptions of :func:`flops_per_cycle`;
  ``--flops-per-cycle`` overrides it for a processor the table gets wrong.

The BLAS is the library given (``--blas-lib``, or ``$HPCVAL_BLAS_LIB``: a
shared library exporting ``cblas_dgemm``, e.g. the Spack environment's
OpenBLAS, called through :mod:`ctypes` on the same numpy arrays), else
numpy's own (``numpy.dot``). Its threads are the CPUs it may run on unless
``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS`` say
otherwise (fewer threads than cores: the peak counts the cores the threads
use). Each product is checked (one column against a matrix-vector product): a
BLAS that returns wrong numbers fast is an error, not a figure.

The matrix order comes from :func:`hpcval.node.sizing.dgemm` (one multiply about a
second at the computed peak, the matrices within half the memory available).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hpcval.core.errors import HpcvalError
from hpcval.node import sizing

#: (flag, double-precision FLOPs per cycle per core, what it assumes); the first
#: row whose flag the CPU has counts.
FLOPS_TABLE: tuple[tuple[str, int, str], ...] = (
    ("avx512f", 32, "AVX-512: two 512-bit FMA units (8 doubles x 2 FLOPs x 2 units)"),
    ("fma", 16, "AVX2/FMA: two 256-bit FMA units (4 doubles x 2 FLOPs x 2 units)"),
    ("avx", 8, "AVX without FMA: one 256-bit add and one 256-bit multiply (4 + 4)"),
    ("sse2", 4, "SSE2: one 128-bit add and one 128-bit multiply (2 + 2)"),
)
#: Without any flag of the table: one add and one multiply of one double.
FLOPS_SCALAR = 2
#: Where the marker's figure line starts (:mod:`hpcval.parsers.dgemm` reads it).
HEADER = "# hpcval dgemm"
#: Environment variables naming the BLAS's threads; set to the CPUs we may use
#: where none is set.
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "BLIS_NUM_THREADS")
BLAS_ENV = "HPCVAL_BLAS_LIB"


class DgemmError(HpcvalError):
    """A DGEMM that could not run, or whose product is wrong."""


@dataclass(frozen=True)
class Peak:
    """The node's computed peak and what it rests on (``gflops`` ``None``: unknown)."""

    gflops: float | None
    cores: int
    mhz: float | None
    mhz_source: str
    flops_per_cycle: int
    flops_basis: str

    def describe(self) -> str:
        mhz = f"{self.mhz:,.0f} MHz ({self.mhz_source})" if self.mhz else "frequency unknown"
        return (f"{self.cores} core{'s' * (self.cores != 1)} x {mhz} x "
                f"{self.flops_per_cycle} FLOP/cycle ({self.flops_basis})")


def _cpuinfo_fields(text: str) -> dict[str, str]:
    """The first processor's fields of ``/proc/cpuinfo``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if out:
                break
            continue
        key, _, value = line.partition(":")
        out.setdefault(key.strip().lower(), value.strip())
    return out


def flops_per_cycle(flags: set[str], vendor: str = "", family: int | None = None,
                    ) -> tuple[int, str]:
    """DP FLOPs per cycle per core from the CPU flags (:data:`FLOPS_TABLE`), and why.

    Exceptions the flags cannot show: AMD family 0x19 (Zen 4) has AVX-512 on
    256-bit units (16, as AVX2/FMA); AMD family 0x1A (Zen 5) is counted with two
    512-bit units (its server parts; its mobile parts have 256-bit units). An
    Intel Xeon with one 512-bit FMA unit (some Silver, Bronze and Gold 5xxx) shows
    the same flags as one with two: the table counts two."""
    if "avx512f" in flags and vendor == "AuthenticAMD" and family == 0x19:
        return 16, "AVX-512 on 256-bit units (AMD family 0x19, Zen 4): as AVX2/FMA"
    for flag, flops, why in FLOPS_TABLE:
        if flag in flags:
            return flops, why
    return FLOPS_SCALAR, "no SSE2/AVX flag: one scalar add and one multiply"


def usable_cpus() -> list[int]:
    """The CPUs this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def physical_cores(cpus: Sequence[int], root: Path = Path("/")) -> int:
    """Distinct (package, core) among ``cpus``; ``len(cpus)`` where unreadable."""
    seen = set()
    for cpu in cpus:
        topo = root / f"sys/devices/system/cpu/cpu{cpu}/topology"
        try:
            seen.add(((topo / "physical_package_id").read_text().strip(),
                      (topo / "core_id").read_text().strip()))
        except OSError:
            return len(cpus)
    return len(seen) or len(cpus)


def frequency_mhz(cpus: Sequence[int], cpuinfo: str,
                  root: Path = Path("/")) -> tuple[float | None, str]:
    """(MHz, source): cpufreq's ``base_frequency``, else ``cpuinfo_max_freq`` (the
    least over ``cpus``), else the mean ``cpu MHz`` of ``/proc/cpuinfo``."""
    for name in ("base_frequency", "cpuinfo_max_freq"):
        values = []
        for cpu in cpus:
            try:
                values.append(int((root / f"sys/devices/system/cpu/cpu{cpu}/cpufreq/{name}")
                                  .read_text()) / 1000)
            except (OSError, ValueError):
                break
        if values and len(values) == len(cpus):
            return min(values), f"cpufreq {name}"
    mhz = [float(v) for v in re.findall(r"^cpu MHz\s*:\s*([0-9.]+)", cpuinfo, re.MULTILINE)]
    if mhz:
        return sum(mhz) / len(mhz), "cpuinfo cpu MHz"
    return None, "unknown"


def node_peak(cpus: Sequence[int] | None = None, root: Path = Path("/"),
              flops_override: int | None = None) -> Peak:
    """The peak of the cores ``cpus`` (default: those this process may run on)."""
    cpus = list(cpus) if cpus is not None else usable_cpus()
    try:
        text = (root / "proc/cpuinfo").read_text()
    except OSError:
        text = ""
    first = _cpuinfo_fields(text)
    flags = set(first.get("flags", "").split())
    try:
        family: int | None = int(first.get("cpu family", ""))
    except ValueError:
        family = None
    if flops_override:
        flops, basis = flops_override, "given (--flops-per-cycle)"
    elif not flags:
        flops, basis = FLOPS_SCALAR, "CPU flags unreadable"
    else:
        flops, basis = flops_per_cycle(flags, first.get("vendor_id", ""), family)
    cores = physical_cores(cpus, root)
    mhz, source = frequency_mhz(cpus, text, root)
    known = bool(mhz) and (bool(flags) or bool(flops_override))
    gflops = cores * mhz * flops / 1000 if known and mhz else None
    return Peak(gflops, cores, mhz, source, flops, basis)


def numpy_blas(np: Any) -> str:
    """What numpy's own BLAS is (``numpy 2.1.3 (scipy-openblas 0.3.27)``)."""
    name = ""
    try:
        info = np.show_config(mode="dicts")
        blas = info.get("Build Dependencies", {}).get("blas", {})
        name = " ".join(str(blas[k]) for k in ("name", "version") if blas.get(k))
    except (TypeError, AttributeError, KeyError):
        pass
    return f"numpy {np.__version__}" + (f" ({name})" if name else "")


def _cblas(lib: str) -> Any:
    try:
        handle = ctypes.CDLL(lib)
        fn = handle.cblas_dgemm
    except OSError as err:
        raise DgemmError(f"--blas-lib {lib}: cannot load it ({err}): give a shared library "
                         "that exports cblas_dgemm, or none for numpy's") from None
    except AttributeError:
        raise DgemmError(f"--blas-lib {lib}: exports no cblas_dgemm: give a CBLAS "
                         "library (e.g. libopenblas.so), or none for numpy's") from None
    fn.restype = None
    dbl, i = ctypes.c_double, ctypes.c_int
    fn.argtypes = [i, i, i, i, i, i, dbl, ctypes.c_void_p, i, ctypes.c_void_p, i, dbl,
                   ctypes.c_void_p, i]
    return fn


@dataclass
class Result:
    n: int
    threads: int
    blas: str
    seconds: list[float]
    gflops: list[float]
    peak: Peak
    size_reason: str

    def share(self) -> float | None:
        return max(self.gflops) / self.peak.gflops if self.peak.gflops and self.gflops else None

    def text(self) -> str:
        lines = [HEADER, f"host: {socket.gethostname()}", f"blas: {self.blas}",
                 f"n: {self.n}", f"threads: {self.threads}", f"size: {self.size_reason}",
                 "peak_gflops: " + (f"{self.peak.gflops:.2f}" if self.peak.gflops
                                    else "unknown"),
                 f"peak: {self.peak.describe()}"]
        lines += [f"sample {i + 1}: {s:.4f} s {g:.3f} GFLOP/s"
                  for i, (s, g) in enumerate(zip(self.seconds, self.gflops, strict=True))]
        share = self.share()
        lines.append(f"best_gflops: {max(self.gflops):.3f}")
        lines.append("share_of_peak: " + (f"{share:.3f}" if share is not None else "unknown"))
        return "\n".join(lines) + "\n"

    def probe(self) -> dict[str, Any]:
        """The probe's ``dgemm`` object (the interface of the vet probe line)."""
        return {"gflops": self.gflops, "peak_gflops": self.peak.gflops, "blas": self.blas,
                "n": self.n, "threads": self.threads, "peak": asdict(self.peak)}


def run(n: int, samples: int, blas_lib: str | None = None, peak: Peak | None = None,
        size_reason: str = "given") -> Result:
    """``samples`` timed multiplies of order ``n`` after one warm-up. Import numpy
    only after the thread variables are set (:func:`main` does)."""
    import numpy as np

    threads = int(next((os.environ[v] for v in THREAD_VARS if os.environ.get(v)), "0")
                  or 0) or len(usable_cpus())
    rng = np.random.default_rng(43)
    a = rng.random((n, n))
    b = rng.random((n, n))
    c = np.empty((n, n))
    if blas_lib:
        fn = _cblas(blas_lib)
        blas = f"{Path(blas_lib).name} (cblas_dgemm, {blas_lib})"

        def multiply() -> None:
            # CblasRowMajor=101, CblasNoTrans=111
            fn(101, 111, 111, n, n, n, 1.0, a.ctypes.data, n, b.ctypes.data, n, 0.0,
               c.ctypes.data, n)
    else:
        blas = numpy_blas(np)

        def multiply() -> None:
            np.dot(a, b, out=c)

    probe_col = b[:, n // 2].copy()
    multiply()  # warm-up: threads started, pages touched
    seconds: list[float] = []
    for i in range(samples):
        c[:, n // 2] = np.nan
        t0 = time.perf_counter()
        multiply()
        seconds.append(time.perf_counter() - t0)
        want = a @ probe_col
        if not np.allclose(c[:, n // 2], want, rtol=1e-9, atol=1e-9 * n):
            raise DgemmError(f"sample {i + 1}: the product of {blas} is wrong (column "
                             f"{n // 2} differs from A b): not a figure")
    gflops = [2 * n ** 3 / s / 1e9 for s in seconds]
    peak = peak or node_peak()
    if threads < peak.cores:
        # fewer BLAS threads than cores (nodes sharing a machine): the peak of the cores used
        peak = replace(peak, cores=threads,
                       gflops=peak.gflops * threads / peak.cores if peak.gflops else None)
    return Result(n, threads, blas, seconds, gflops, peak, size_reason)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hpcval.node.dgemm",
                                 description="DGEMM on this node: GFLOP/s per sample and "
                                 "the share of the node's computed peak")
    ap.add_argument("--n", type=int, default=None,
                    help="matrix order (default: hpcval.node.sizing.dgemm for this node)")
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--budget", default=sizing.DEFAULT_BUDGET, choices=sizing.BUDGETS)
    ap.add_argument("--blas-lib", default=os.environ.get(BLAS_ENV) or None,
                    help=f"a CBLAS shared library (default ${BLAS_ENV}, else numpy's BLAS)")
    ap.add_argument("--flops-per-cycle", type=int, default=None,
                    help="DP FLOPs per cycle per core (default: from the CPU flags)")
    ap.add_argument("--json", action="store_true", help="one JSON line instead of text")
    args = ap.parse_args(argv)
    try:
        if args.samples < 1:
            raise DgemmError(f"--samples {args.samples}: at least 1 multiply; exit 2")
        if args.n is not None and args.n < 64:
            raise DgemmError(f"--n {args.n}: an order of at least 64; exit 2")
        if args.flops_per_cycle is not None and args.flops_per_cycle < 1:
            raise DgemmError(f"--flops-per-cycle {args.flops_per_cycle}: at least 1; exit 2")
        cpus = usable_cpus()
        for var in THREAD_VARS:
            os.environ.setdefault(var, str(len(cpus)))
        peak = node_peak(cpus, flops_override=args.flops_per_cycle)
        if args.n is not None:
            n, reason = args.n, "given (--n)"
        else:
            avail = _mem_available()
            node = sizing.Node(len(cpus), None, avail, "this host (MemAvailable)")
            size = sizing.dgemm(node, args.budget, peak.gflops, args.samples)
            n, reason = size.params["n"], size.reason
        result = run(n, args.samples, args.blas_lib, peak, reason)
    except (HpcvalError, MemoryError) as err:
        print(f"hpcval dgemm: {err}" if str(err) else "hpcval dgemm: out of memory",
              file=sys.stderr)
        return 2 if "exit 2" in str(err) else 3
    if args.json:
        print(json.dumps(result.probe()), flush=True)
    else:
        print(result.text(), end="", flush=True)
    return 0


def _mem_available(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    try:
        m = re.search(r"^MemAvailable:\s+(\d+) kB", meminfo.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(m.group(1)) * 1024 if m else sizing.host_memory(meminfo)


if __name__ == "__main__":
    sys.exit(main())
