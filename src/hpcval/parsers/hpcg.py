"""Parser for the HPCG benchmark's summary file: its official rating, validity and time.

HPCG writes its results to a file in the working directory, in one of two
layouts of the same content:

* HPCG 3.1 and later: ``HPCG-Benchmark_3.1_<date>.txt``, one ``key=value``
  per line, nesting written as ``Section::Key``::

      Final Summary::HPCG result is VALID with a GFLOP/s rating of=2.04601
      Final Summary::Results are valid but execution time (sec) is=8.42468
      Final Summary::Official results execution time (sec) must be at least=1800

* HPCG 3.0: ``HPCG-Benchmark-3.0_<date>.yaml``, indented ``Key: value``
  (sections like ``__________ Final Summary __________``); not always valid
  YAML (keys such as ``|x'Ay-y'Ax|``), so it is read line by line.

The official figure is "HPCG result is VALID with a GFLOP/s rating of"
(total GFLOP/s including the convergence and optimisation overheads). When
HPCG's own checks fail it writes "HPCG result is INVALID." instead: the run
parses with :attr:`HpcgResult.valid` False and :func:`check_valid` refuses
it, naming which of HPCG's tests failed. A file without the ``Final
Summary`` (HPCG killed, file cut) or garbage raise
:class:`~hpcval.core.errors.ParseError` naming the line and the reason.

Intel MKL's optimised HPCG (``xhpcg_skx``, ``xhpcg_avx2``... of the MKL
benchmarks, oneMKL's ``benchmarks/hpcg``) writes the same summary under the
run's name instead of ``HPCG-Benchmark``: the file is named
``n104-4p-1t-V3.0_2019.03.27.09.42.12.yaml`` or
``n104-96p-1t_V3.1_2023-08-25_16-18-10.txt`` (local grid, processes,
threads, version, date) and its first line is that name (``n104-4p-1t
version: V3.0`` in the ``.yaml`` layout, ``n104-96p-1t`` then ``version=V3.1``
in the ``.txt`` one, whose section names carry blanks: `` Final Summary ::``).
Both are read like the reference summaries; :attr:`HpcgResult.name` keeps
the name. A file is taken for an HPCG summary when its first line is such a
name (``HPCG-Benchmark`` or ``n<N>-<P>p-<T>t``) or it names HPCG near its top,
and it has a ``Machine Summary``.

A rating from a run shorter than the official minimum (1800 s) is still
HPCG's rating; :attr:`HpcgResult.official` says whether the run was long
enough to be submitted.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from hpcval.core.errors import ParseError

_SECTION_DECORATION = re.compile(r"^[_#\s]+|[_#\s]+$")
#: The run name Intel MKL's optimised HPCG puts first: ``n<nx>-<ranks>p-<threads>t``.
_MKL_NAME_RE = re.compile(r"^(?P<name>n\d+-\d+p-\d+t)(?:\s+version)?\s*(?:[:=].*)?$")
#: File names of the summaries: the reference HPCG's and Intel MKL's.
SUMMARY_NAME_RE = re.compile(r"^(HPCG-Benchmark.*|n\d+-\d+p-\d+t[-_]V[\d.]+_.*)\.(txt|yaml)$")
_VALID_KEY = "HPCG result is VALID with a GFLOP/s rating of"
#: HPCG's minimum benchmark time for an official result (``ReportResults.cpp``).
OFFICIAL_MIN_TIME_S = 1800.0


@dataclass
class HpcgResult:
    """One HPCG summary."""

    source: str
    version: str | None
    #: True: "HPCG result is VALID"; False: "HPCG result is INVALID.".
    valid: bool
    #: The official GFLOP/s rating (None for an invalid run).
    rating_gflops: float | None
    #: The HPCG 2.4 rating printed beside it ("for historical reasons").
    rating_24_gflops: float | None
    #: Benchmark time (s): ``Benchmark Time Summary::Total``.
    time_s: float | None
    #: The minimum time HPCG requires for an official result (s).
    official_min_time_s: float | None
    ranks: int | None
    threads_per_rank: int | None
    global_dims: tuple[int, int, int] | None
    local_dims: tuple[int, int, int] | None
    #: ``Section::Key`` → value as written (sub-sections dropped from the key).
    entries: dict[str, str] = field(default_factory=dict)
    #: HPCG's verification results (``Result`` of each V&V section): section → PASSED/FAILED.
    checks: dict[str, str] = field(default_factory=dict)
    #: The other lines of HPCG's Final Summary (reference kernels used, etc.).
    notes: list[str] = field(default_factory=list)
    #: The run's name on the first line: ``HPCG-Benchmark`` (reference HPCG) or
    #: ``n104-4p-1t`` (Intel MKL's optimised HPCG).
    name: str | None = None

    @property
    def official(self) -> bool:
        """The run lasted at least HPCG's minimum for an official result
        (the minimum the summary states, else HPCG's 1800 s)."""
        if self.time_s is None or not self.valid:
            return False
        return self.time_s >= (self.official_min_time_s or OFFICIAL_MIN_TIME_S)


def _section(name: str) -> str:
    return _SECTION_DECORATION.sub("", name).strip()


def _entries(text: str, source: str) -> tuple[str | None, list[tuple[int, str, str, str]]]:
    """(layout, [(line, section, key, value)]) of a ``.txt`` or ``.yaml`` summary."""
    lines = text.splitlines()
    last = max((n for n, line in enumerate(lines, start=1) if line.strip()), default=0)
    if any("::" in line and "=" in line for line in lines[:40]) or \
            (lines and (lines[0].strip() == "HPCG-Benchmark" or
                        re.fullmatch(r"n\d+-\d+p-\d+t", lines[0].strip()))):
        out = []
        for n, line in enumerate(lines, start=1):
            if "=" not in line:
                if n == last and n > 1:
                    break  # a line cut where the file stops: truncation
                if line.strip() and n > 1:
                    raise ParseError(f"{source}:{n}: not 'key=value' in an HPCG summary: "
                                     f"{line.strip()[:60]!r}")
                continue
            key, _, value = line.partition("=")
            parts = [p.strip() for p in key.split("::")]
            out.append((n, _section(parts[0]), parts[-1], value.strip()))
        return "txt", out
    out = []
    section = ""
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if ":" not in line:
            if n == last:
                break  # a line cut where the file stops: truncation
            raise ParseError(f"{source}:{n}: not 'Key: value' in an HPCG summary: "
                             f"{line.strip()[:60]!r}")
        key, _, value = line.partition(": ") if ": " in line else line.rstrip().rpartition(":")
        if not line[:1].isspace():
            section = _section(key)
            out.append((n, section, section, value.strip()))
        else:
            out.append((n, section, key.strip(), value.strip()))
    return ("yaml" if out else None), out


def _float(value: str, line: int, what: str, source: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ParseError(f"{source}:{line}: {what} is not a number: {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise ParseError(f"{source}:{line}: impossible value of {what}: {value!r}")
    return number


def parse_hpcg(text: str, source: str = "HPCG summary") -> HpcgResult:
    """Parse an ``HPCG-Benchmark*.txt`` (3.1) or ``.yaml`` (3.0) summary, or
    the same written by Intel MKL's optimised HPCG (``n104-4p-1t-V3.0_*.yaml``,
    ``n104-96p-1t_V3.1_*.txt``)."""
    first = text.lstrip().partition("\n")[0].strip()
    mkl = _MKL_NAME_RE.match(first)
    if not ("HPCG" in text[:200] or mkl) or \
            not re.search(r"^\s*Machine Summary\s*[:=]", text, re.MULTILINE):
        raise ParseError(f"{source}: not an HPCG summary (no 'HPCG-Benchmark' or Intel MKL run "
                         "name such as 'n104-4p-1t' on its first line, or no 'Machine Summary')")
    name = mkl.group("name") if mkl else ("HPCG-Benchmark" if first.startswith("HPCG-Benchmark")
                                          else None)
    _, rows = _entries(text, source)
    entries: dict[str, str] = {}
    where: dict[str, int] = {}
    version = None
    for n, section, key, value in rows:
        entries[f"{section}::{key}"] = value
        where[f"{section}::{key}"] = n
        if key.lower() in ("version", "hpcg-benchmark version") or \
                (n == 1 and mkl and key.lower() == f"{mkl.group('name')} version"):
            version = version or value
    final = [(n, key, value) for n, section, key, value in rows if section == "Final Summary"
             and key != "Final Summary"]
    if not final:
        raise ParseError(f"{source}: HPCG summary without its Final Summary: HPCG was killed "
                         "or crashed before reporting, or the file is cut")

    def number(key: str, what: str) -> float | None:
        if key not in entries:
            return None
        return _float(entries[key], where[key], what, source)

    valid: bool | None = None
    rating = rating_24 = min_time = None
    notes: list[str] = []
    for n, key, value in final:
        if key == _VALID_KEY:
            valid, rating = True, _float(value, n, "the HPCG GFLOP/s rating", source)
        elif key.startswith("HPCG result is") and "INVALID" in f"{key} {value}".upper():
            valid = False  # "HPCG result is=INVALID." (and vendor forms "... INVALID because")
        elif key.lower().startswith("hpcg 2.4 rating"):
            rating_24 = _float(value, n, "the HPCG 2.4 rating", source)
        elif key.startswith("Official results execution time (sec) must be at least"):
            min_time = _float(value, n, "the official minimum time", source)
        else:
            notes.append(f"{key}: {value}" if value else key)
    if valid is None:
        raise ParseError(f"{source}: HPCG Final Summary states no result (neither VALID with "
                         "a rating nor INVALID): the file is cut or not an HPCG summary")
    checks = {section: value for _, section, key, value in rows if key == "Result"}

    def dims(section: str, names: tuple[str, str, str]) -> tuple[int, int, int] | None:
        values = [entries.get(f"{section}::{k}") for k in names]
        if any(v is None for v in values):
            return None
        try:
            x, y, z = (int(v) for v in values if v is not None)
        except ValueError:
            raise ParseError(f"{source}: {section} are not whole numbers: {values}") from None
        return x, y, z

    ranks = number("Machine Summary::Distributed Processes", "the process count")
    threads = number("Machine Summary::Threads per processes", "the thread count")
    return HpcgResult(
        source=source,
        version=version,
        valid=valid,
        rating_gflops=rating,
        rating_24_gflops=rating_24,
        time_s=number("Benchmark Time Summary::Total", "the benchmark time"),
        official_min_time_s=min_time,
        ranks=int(ranks) if ranks is not None else None,
        threads_per_rank=int(threads) if threads is not None else None,
        global_dims=dims("Global Problem Dimensions", ("Global nx", "Global ny", "Global nz")),
        local_dims=dims("Local Domain Dimensions", ("nx", "ny", "nz")),
        entries=entries,
        checks=checks,
        notes=notes,
        name=name,
    )


def check_valid(result: HpcgResult) -> HpcgResult:
    """The result, or :class:`ParseError` when HPCG itself reported the run
    INVALID (naming the verification sections that did not pass)."""
    if not result.valid:
        failed = [s for s, v in result.checks.items() if v.upper() != "PASSED"]
        why = (f"failed: {', '.join(failed)}" if failed
               else "no verification section names the failure; see the summary")
        raise ParseError(f"{result.source}: HPCG reports the result INVALID ({why}); "
                         "the rating must not be used")
    return result
