"""Parser for hpcval's DGEMM runner (``python -m hpcval.node.dgemm``), its text output::

    # hpcval dgemm
    host: vm
    blas: numpy 2.4.6 (scipy-openblas 0.3.31.188.0)
    n: 4352
    threads: 2
    size: one multiply ~1 s at the node's computed peak 166 GFLOP/s (...)
    peak_gflops: 166.15
    peak: 2 cores x 2,596 MHz (cpuinfo cpu MHz) x 32 FLOP/cycle (AVX-512: ...)
    sample 1: 1.7478 s 94.323 GFLOP/s
    ...
    best_gflops: 99.974
    share_of_peak: 0.602

``peak_gflops`` and ``share_of_peak`` may read ``unknown``. Output without the
header, without samples, with a sample line cut or not numeric, or that stops
before the closing ``share_of_peak`` line (a run killed mid-way) raises
:class:`~hpcval.core.errors.ParseError` naming the line and the reason.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from hpcval.core.errors import ParseError

HEADER = "# hpcval dgemm"
_SAMPLE_RE = re.compile(r"^sample (\d+): ([0-9.eE+-]+) s ([0-9.eE+-]+) GFLOP/s$")
_KEYS = ("host", "blas", "n", "threads", "size", "peak_gflops", "peak", "best_gflops",
         "share_of_peak")


@dataclass
class DgemmResult:
    source: str
    blas: str = ""
    n: int = 0
    threads: int = 0
    host: str = ""
    size: str = ""
    peak_gflops: float | None = None
    peak: str = ""
    seconds: list[float] = field(default_factory=list)
    gflops: list[float] = field(default_factory=list)
    share_of_peak: float | None = None

    def shares(self) -> list[float]:
        """Each sample's share of the computed peak (empty where the peak is unknown)."""
        return [g / self.peak_gflops for g in self.gflops] if self.peak_gflops else []


def _number(text: str, key: str, where: str) -> float | None:
    if text == "unknown":
        return None
    try:
        value = float(text)
    except ValueError:
        raise ParseError(f"{where}: {key} {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ParseError(f"{where}: {key} {text!r} is not a finite figure >= 0")
    return value


def parse_dgemm(text: str, source: str = "dgemm output") -> DgemmResult:
    """One run of the DGEMM runner."""
    lines = text.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == HEADER)
    except StopIteration:
        raise ParseError(f"{source}: no '{HEADER}' line: not the output of "
                         "python -m hpcval.node.dgemm") from None
    out = DgemmResult(source)
    done = False
    for number, raw in enumerate(lines[start + 1:], start + 2):
        line = raw.strip()
        where = f"{source} line {number}"
        if not line:
            continue
        if line == HEADER:
            raise ParseError(f"{where}: a second run starts here: one run per output")
        m = _SAMPLE_RE.match(line)
        if m:
            if int(m.group(1)) != len(out.gflops) + 1:
                raise ParseError(f"{where}: sample {m.group(1)} out of order (expected "
                                 f"{len(out.gflops) + 1})")
            seconds = _number(m.group(2), "seconds", where)
            gflops = _number(m.group(3), "GFLOP/s", where)
            if not seconds or gflops is None:
                raise ParseError(f"{where}: sample without a time or rate: {line!r}")
            out.seconds.append(seconds)
            out.gflops.append(gflops)
            continue
        if line.startswith("sample "):
            raise ParseError(f"{where}: a sample line cut or not numeric: {line!r}")
        key, sep, value = line.partition(": ")
        if not sep or key not in _KEYS:
            continue  # a line of the job's own (module loads, warnings)
        if key in ("n", "threads"):
            if not value.isdigit():
                raise ParseError(f"{where}: {key} {value!r} is not a whole number")
            setattr(out, key, int(value))
        elif key in ("peak_gflops", "share_of_peak"):
            setattr(out, key, _number(value, key, where))
            done = done or key == "share_of_peak"
        elif key != "best_gflops":
            setattr(out, key, value)
    if not out.gflops:
        raise ParseError(f"{source}: no sample lines ('sample 1: ... GFLOP/s')")
    if not done:
        raise ParseError(f"{source}: ends after {len(out.gflops)} sample(s), before "
                         "'share_of_peak': the run was cut short")
    if not out.n:
        raise ParseError(f"{source}: no 'n:' line (matrix order)")
    return out
