"""Parser for BabelStream (University of Bristol), the STREAM kernels on GPUs.

BabelStream 3.x-5.x prints its configuration, then one row per kernel::

    BabelStream
    Version: 5.0
    Implementation: CUDA
    Running kernels 100 times
    Precision: double
    Array size: 268.4 MB (=0.3 GB)
    Total size: 805.3 MB (=0.8 GB)
    Using CUDA device NVIDIA A100-SXM4-80GB
    Driver: 12030
    Function    MBytes/sec  Min (sec)   Max         Average
    Copy        1709360.800 0.00031     0.00032     0.00032
    Mul         ...
    Triad       1724827.354 0.00047     0.00047     0.00047
    Dot         1586905.948 0.00034     0.00036     0.00035

The rate is the best of the ``Running kernels N times`` repetitions, in
MBytes/sec (10^6 bytes per second); ``Array size`` is one of the three arrays
in MB (10^6 bytes). A run whose results do not check prints ``Validation
failed on ...``: it parses, with the lines in :attr:`BabelStreamResult.failures`,
and :func:`check_complete` refuses it. ``--csv`` output is not read.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from hpcval.core.errors import ParseError

#: Kernels of BabelStream 4/5 (3.x also prints them; ``Nstream`` only with --nstream).
KERNELS = ("Copy", "Mul", "Add", "Triad", "Dot")

_HEADER_RE = re.compile(r"^\s*Function\s+MBytes/sec\s+Min \(sec\)\s+Max\s+Average\s*$")
_ROW_RE = re.compile(r"^\s*(?P<name>Copy|Mul|Add|Triad|Dot|Nstream)\s+(?P<rest>\S.*)$")
_VERSION_RE = re.compile(r"^\s*Version:\s*(?P<v>\S+)")
_IMPL_RE = re.compile(r"^\s*Implementation:\s*(?P<v>.+?)\s*$")
_TIMES_RE = re.compile(r"^\s*Running (?:kernels|\w+) (?P<n>\d+) times")
_PRECISION_RE = re.compile(r"^\s*Precision:\s*(?P<v>\w+)")
_ARRAY_RE = re.compile(r"^\s*Array size:\s*(?P<mb>[\d.]+)\s*MB")
_DEVICE_RE = re.compile(r"^\s*Using \S+ device (?P<v>.+?)\s*$")
_FAILED_RE = re.compile(r"Validation failed")


@dataclass(frozen=True)
class Kernel:
    name: str
    mbytes_per_sec: float
    min_s: float
    max_s: float
    avg_s: float


@dataclass
class BabelStreamResult:
    source: str
    version: str | None = None
    implementation: str | None = None
    device: str | None = None
    precision: str | None = None
    repetitions: int | None = None
    #: One array, MB (10^6 bytes), as BabelStream prints it (one decimal).
    array_mb: float | None = None
    kernels: dict[str, Kernel] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def rate(self, kernel: str) -> float:
        """Best rate of ``kernel`` in MB/s (10^6 bytes/s)."""
        name = kernel.capitalize()
        if name not in self.kernels:
            raise ParseError(f"{self.source}: no {name} row in the BabelStream output "
                             f"(has {', '.join(self.kernels) or 'none'})")
        return self.kernels[name].mbytes_per_sec


def parse_babelstream(text: str, source: str = "BabelStream output") -> BabelStreamResult:
    """Parse one BabelStream run."""
    result = BabelStreamResult(source=source)
    header = False
    for line_no, line in enumerate(text.splitlines(), start=1):
        if m := _VERSION_RE.match(line):
            result.version = m.group("v")
        elif m := _IMPL_RE.match(line):
            result.implementation = m.group("v")
        elif m := _TIMES_RE.match(line):
            result.repetitions = int(m.group("n"))
        elif m := _PRECISION_RE.match(line):
            result.precision = m.group("v")
        elif m := _ARRAY_RE.match(line):
            try:
                result.array_mb = float(m.group("mb"))
            except ValueError:
                raise ParseError(f"{source}:{line_no}: array size {m.group('mb')!r} is not "
                                 "a number") from None
        elif m := _DEVICE_RE.match(line):
            result.device = m.group("v")
        elif _HEADER_RE.match(line):
            header = True
        elif _FAILED_RE.search(line):
            result.failures.append(line.strip())
        elif header and (m := _ROW_RE.match(line)):
            name = m.group("name")
            if name in result.kernels:
                raise ParseError(f"{source}:{line_no}: a second {name} row: two runs in one "
                                 "file? parse each on its own")
            tokens = m.group("rest").split()
            if len(tokens) != 4:
                raise ParseError(f"{source}:{line_no}: {name} row has {len(tokens)} values, "
                                 "4 expected (rate, min, max, average): a cut row")
            try:
                values = [float(t) for t in tokens]
            except ValueError:
                raise ParseError(f"{source}:{line_no}: not a number in the {name} row") \
                    from None
            if any(not math.isfinite(v) or v < 0 for v in values):
                raise ParseError(f"{source}:{line_no}: impossible value in the {name} row")
            result.kernels[name] = Kernel(name, *values)
    if not header:
        raise ParseError(f"{source}: no BabelStream table ('Function MBytes/sec ...' header): "
                         "not BabelStream output, or it stopped before measuring")
    return result


def check_complete(result: BabelStreamResult, kernels: tuple[str, ...] = ("Triad",)
                   ) -> BabelStreamResult:
    """The result, or :class:`ParseError` when BabelStream's own validation
    failed or a needed kernel's row is missing (a killed run)."""
    if result.failures:
        raise ParseError(f"{result.source}: BabelStream's results failed its own validation: "
                         f"{'; '.join(result.failures)}")
    missing = [k for k in kernels if k not in result.kernels]
    if missing:
        raise ParseError(f"{result.source}: no {', '.join(missing)} row: the run was cut off")
    return result
