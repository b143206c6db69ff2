"""Parser for the STREAM memory-bandwidth benchmark, reference C (5.x) and Fortran output.

The C version (``stream.c``, 5.10) prints its configuration, then one row per
kernel and a validation line::

    STREAM version $Revision: 5.10 $
    This system uses 8 bytes per array element.
    Array size = 10000000 (elements), Offset = 0 (elements)
    Each kernel will be executed 10 times.
    Number of Threads counted = 2
    Function    Best Rate MB/s  Avg time     Min time     Max time
    Copy:           28891.4     0.006015     0.005538     0.006805
    ...
    Solution Validates: avg error less than 1.000000e-13 on all three arrays

The Fortran version (``stream.f``, whose revision line reads 5.6) prints
``Array size =   20000000``, ``Number of Threads =  2``, a ``Rate (MB/s)``
header and `` Solution Validates!``. Rates are in MB/s (10^6 bytes per
second), as STREAM prints them.

A run whose arrays did not validate prints ``Failed Validation on array
a[]`` (C) or ``a()`` (Fortran); it parses, with the messages in
:attr:`StreamResult.failures`, and :func:`check_complete` refuses it. Output
without a kernel table, a kernel row that is cut or not numeric, or output
that stops before all four kernels and the validation line raise
:class:`~hpcval.core.errors.ParseError` naming the line and the reason.

One output can hold several runs: a thread-scaling log (STREAM run with
``OMP_NUM_THREADS`` 1, 2, 4, ... into one file) or job outputs appended over
several jobs. :func:`parse_stream_runs` gives every run, each with its own
thread count, array size and kernel rates, and the line it starts on. A run
starts at its ``STREAM version`` line; where a run prints none, at the first
of its configuration lines (bytes per element, array size, times, threads,
the ``Function`` header) after the previous run's kernel rows. A run cut off
by the next one (a killed job) is still a run of its own, and
:func:`check_complete` refuses it. :func:`parse_stream` reads one run and
refuses an output of several, naming the lines they start on, rather than
mixing their figures.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from hpcval.core.errors import ParseError

#: The four STREAM kernels, in the order STREAM prints them.
KERNELS = ("Copy", "Scale", "Add", "Triad")

_VERSION_RE = re.compile(r"STREAM [Vv]ersion \$Revision:\s*(?P<version>[\d.]+)")
_BYTES_RE = re.compile(r"This system uses (?P<n>\d+) bytes per array element")
_FORTRAN_BYTES_RE = re.compile(r"Assuming (?P<n>\d+) bytes per DOUBLE PRECISION word")
_ARRAY_RE = re.compile(r"^\s*Array size\s*=\s*(?P<n>\d+)")
_NTIMES_RE = re.compile(r"(?:executed|running each test)\s+(?P<n>\d+)\s+times")
_THREADS_RE = re.compile(r"Number of Threads (?:counted )?=\s*(?P<n>\d+)")
_HEADER_RE = re.compile(r"^\s*Function\s+(?:Best Rate MB/s|Rate \(MB/s\))")
_ROW_RE = re.compile(r"^\s*(?P<name>Copy|Scale|Add|Triad):(?P<rest>.*)$")
_VALID_RE = re.compile(r"Solution Validates")
_FAILED_RE = re.compile(r"Failed Validation on array (?P<array>\w)")


@dataclass(frozen=True)
class StreamKernel:
    """One kernel row: best rate (MB/s) and the average/min/max time (s)."""

    name: str
    best_rate_mb_s: float
    avg_time_s: float
    min_time_s: float
    max_time_s: float


@dataclass
class StreamResult:
    """One STREAM run."""

    source: str
    version: str | None = None
    #: ``c`` or ``fortran`` (from the header STREAM prints).
    language: str = "c"
    array_elements: int | None = None
    bytes_per_element: int = 8
    ntimes: int | None = None
    threads: int | None = None
    kernels: dict[str, StreamKernel] = field(default_factory=dict)
    validated: bool = False
    #: STREAM's own ``Failed Validation`` lines.
    failures: list[str] = field(default_factory=list)
    #: Line of the output the run starts on (1-based).
    line: int = 1

    @property
    def array_bytes(self) -> int | None:
        """Size of one array in bytes (STREAM allocates three)."""
        if self.array_elements is None:
            return None
        return self.array_elements * self.bytes_per_element

    def rate(self, kernel: str) -> float:
        """Best rate of ``kernel`` (``Copy``, ``Scale``, ``Add``, ``Triad``) in MB/s."""
        name = kernel.capitalize()
        if name not in self.kernels:
            raise ParseError(f"{self.source}: no {name} row in the STREAM output "
                             f"(has {', '.join(self.kernels) or 'none'})")
        return self.kernels[name].best_rate_mb_s


def _numbers(rest: str, line_no: int, name: str, source: str) -> list[float]:
    tokens = rest.split()
    if len(tokens) != 4:
        raise ParseError(f"{source}:{line_no}: STREAM {name} row has {len(tokens)} values, "
                         "4 expected (rate, avg, min, max time): a cut or wrapped row")
    try:
        values = [float(t) for t in tokens]
    except ValueError:
        raise ParseError(f"{source}:{line_no}: not a number in the STREAM {name} row: "
                         f"{rest.strip()!r}") from None
    if any(not math.isfinite(v) or v < 0 for v in values):
        raise ParseError(f"{source}:{line_no}: impossible value in the STREAM {name} row: "
                         f"{rest.strip()!r}")
    return values


#: Lines that open a run (or belong to its configuration), by kind.
_START_KINDS = (("version", _VERSION_RE.search), ("bytes", _BYTES_RE.search),
                ("bytes", _FORTRAN_BYTES_RE.search), ("array", _ARRAY_RE.match),
                ("ntimes", _NTIMES_RE.search), ("threads", _THREADS_RE.search),
                ("header", _HEADER_RE.match))


def _start_kind(line: str) -> str | None:
    for kind, match in _START_KINDS:
        if match(line):
            return kind
    return None


def _split_runs(text: str) -> list[list[tuple[int, str]]]:
    """The output's lines, numbered, grouped into runs (see the module's
    documentation); lines before the first run belong to it."""
    runs: list[list[tuple[int, str]]] = []
    current: list[tuple[int, str]] = []
    kinds: set[str] = set()
    measured = False  # the current run printed a kernel row or its validation
    for number, line in enumerate(text.splitlines(), start=1):
        kind = _start_kind(line)
        if kind is not None:
            if kinds and (measured or kind in kinds or
                          (kind == "version" and kinds - {"bytes"})):
                runs.append(current)
                current, kinds, measured = [], set(), False
            kinds.add(kind)
        elif _ROW_RE.match(line) or _VALID_RE.search(line) or _FAILED_RE.search(line):
            measured = True
        current.append((number, line))
    if current or not runs:
        runs.append(current)
    return runs


def _parse_run(lines: list[tuple[int, str]], source: str, label: str) -> StreamResult:
    """One run from its numbered lines; *source* names the file in line
    errors, *label* the run (the result's :attr:`StreamResult.source`)."""
    result = StreamResult(source=label, line=lines[0][0] if lines else 1)
    header_seen = False
    for line_no, line in lines:
        if result.version is None and (m := _VERSION_RE.search(line)):
            result.version = m.group("version")
            result.language = "fortran" if "STREAM Version" in line else "c"
        elif m := (_BYTES_RE.search(line) or _FORTRAN_BYTES_RE.search(line)):
            result.bytes_per_element = int(m.group("n"))
        elif result.array_elements is None and (m := _ARRAY_RE.match(line)):
            result.array_elements = int(m.group("n"))
        elif m := _NTIMES_RE.search(line):
            result.ntimes = int(m.group("n"))
        elif m := _THREADS_RE.search(line):
            result.threads = int(m.group("n"))
        elif _HEADER_RE.match(line):
            header_seen = True
        elif m := _ROW_RE.match(line):
            if not header_seen:
                raise ParseError(f"{source}:{line_no}: STREAM {m.group('name')} row before the "
                                 "'Function' header")
            name = m.group("name")
            if name in result.kernels:
                raise ParseError(f"{source}:{line_no}: a second {name} row in one STREAM run "
                                 "(without a new header): the output is garbled")
            rate, avg, low, high = _numbers(m.group("rest"), line_no, name, source)
            result.kernels[name] = StreamKernel(name, rate, avg, low, high)
        elif m := _FAILED_RE.search(line):
            result.failures.append(line.strip())
        elif _VALID_RE.search(line):
            result.validated = True
    if not header_seen and not result.kernels:
        raise ParseError(f"{label}: no STREAM kernel table ('Function ... Rate' header): "
                         "not STREAM output, or STREAM stopped before measuring")
    return result


def parse_stream(text: str, source: str = "STREAM output") -> StreamResult:
    """Parse the output of one STREAM run (C or Fortran reference version).
    An output of several runs is refused: read it with :func:`parse_stream_runs`."""
    runs = _split_runs(text)
    if len(runs) > 1:
        starts = ", ".join(str(run[0][0]) for run in runs[:6]) + (", ..." if len(runs) > 6
                                                                  else "")
        raise ParseError(f"{source}: {len(runs)} STREAM runs in one output (starting at lines "
                         f"{starts}): read it with parse_stream_runs, which gives each run "
                         "with its own thread count and figures")
    return _parse_run(runs[0], source, source)


def parse_stream_runs(text: str, source: str = "STREAM output") -> list[StreamResult]:
    """Every STREAM run of an output, in order, each with its thread count,
    array size and rates (a thread-scaling log, or job outputs appended over
    several jobs). An output of one run gives one. A run that is garbled raises
    :class:`ParseError` naming the file and line; a run that is incomplete is
    returned, for :func:`check_complete` to refuse."""
    runs = _split_runs(text)
    if len(runs) == 1:
        return [_parse_run(runs[0], source, source)]
    return [_parse_run(run, source, f"{source} (run {i} of {len(runs)}, line {run[0][0]})")
            for i, run in enumerate(runs, start=1)]


def check_complete(result: StreamResult) -> StreamResult:
    """The result, or :class:`ParseError` when STREAM reported a failed
    validation, or the output stops before all four kernels and the
    validation line (a killed or crashed run)."""
    source = result.source
    if result.failures:
        raise ParseError(f"{source}: STREAM's results failed its own validation: "
                         f"{'; '.join(result.failures)}")
    missing = [k for k in KERNELS if k not in result.kernels]
    if missing:
        raise ParseError(f"{source}: STREAM output has no {', '.join(missing)} row: "
                         "the run was cut off or killed")
    if not result.validated:
        raise ParseError(f"{source}: STREAM output ends before 'Solution Validates': the "
                         "run was cut off or killed before checking its arrays")
    return result
