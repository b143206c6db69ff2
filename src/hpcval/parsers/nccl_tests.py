"""Parser for NVIDIA's nccl-tests (``all_reduce_perf`` and the other ``*_perf``).

The output names the run, the devices (one ``#  Rank N ... on HOST device D
[BUS] NAME`` line per rank), then one row per message size with an
out-of-place and an in-place half (here cut after the out-of-place half)::

    #       size         count      type   redop    root     time   algbw   busbw #wrong ...
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)        ...
       8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0 ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 70.742

``algbw`` and ``busbw`` are GB/s (10^9 bytes/s); ``busbw`` is the figure that
compares across rank counts (nccl-tests' PERFORMANCE.md). ``#wrong`` counts
wrong results where ``-c 1`` checks them (``N/A`` otherwise); the
``Out of bounds values`` line says ``OK`` or ``FAILED``. Collectives without
a ``redop`` (all_gather) or ``root`` print ``none``/``-1`` there; the columns
are read by position from the end of the row, so both layouts parse. NCCL's
``NCCL INFO``/``WARN`` lines and ranks' prefixes such as `` 0: `` (srun
``--label``) are skipped.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from hpcval.core.errors import ParseError

_RANK_RE = re.compile(r"^#\s+Rank\s+(?P<rank>\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(?P<host>\S+)"
                      r"\s+device\s+(?P<dev>\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*?)\s*$")
_HEADER_RE = re.compile(r"^#\s+size\s+count\s+type\s+redop\s+root\s+time\s+algbw\s+busbw")
_ROW_RE = re.compile(r"^\s*\d+\s+\d+\s+\w+\s")
_LABEL_RE = re.compile(r"^\s*\d+:\s")
_OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<n>\d+)\s+(?P<state>OK|FAILED)")
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<v>\S+)")


@dataclass(frozen=True)
class Row:
    size: int
    count: int
    type: str
    time_us: float
    algbw: float
    busbw: float
    wrong: int | None
    in_time_us: float
    in_algbw: float
    in_busbw: float
    in_wrong: int | None


@dataclass(frozen=True)
class Device:
    rank: int
    host: str
    device: int
    bus: str
    name: str


@dataclass
class NcclResult:
    source: str
    devices: list[Device] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    out_of_bounds: int | None = None
    oob_ok: bool | None = None
    avg_busbw: float | None = None

    def sizes(self) -> list[int]:
        return [r.size for r in self.rows]

    def row(self, size: int) -> Row:
        for r in self.rows:
            if r.size == size:
                return r
        raise ParseError(f"{self.source}: no row for {size} bytes (measured: "
                         f"{self.sizes()[0] if self.rows else '-'} .. "
                         f"{self.sizes()[-1] if self.rows else '-'})")

    def busbw(self, size: int, in_place: bool = False) -> float:
        """Bus bandwidth (GB/s) at ``size`` bytes."""
        r = self.row(size)
        return r.in_busbw if in_place else r.busbw


def _wrong(token: str, where: str) -> int | None:
    if token == "N/A":
        return None
    if not token.isdigit():
        raise ParseError(f"{where}: #wrong is {token!r}, not a count")
    return int(token)


def _float(token: str, where: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise ParseError(f"{where}: {token!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ParseError(f"{where}: impossible value {token!r}")
    return value


def parse_nccl_tests(text: str, source: str = "nccl-tests output") -> NcclResult:
    """Parse one ``*_perf`` run of nccl-tests."""
    result = NcclResult(source=source)
    header = False
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw[_LABEL_RE.match(raw).end():] if _LABEL_RE.match(raw) else raw
        where = f"{source}:{line_no}"
        if m := _RANK_RE.match(line):
            result.devices.append(Device(int(m.group("rank")), m.group("host"),
                                         int(m.group("dev")), m.group("bus"), m.group("name")))
        elif _HEADER_RE.match(line):
            header = True
        elif m := _OOB_RE.match(line):
            result.out_of_bounds = int(m.group("n"))
            result.oob_ok = m.group("state") == "OK"
        elif m := _AVG_RE.match(line):
            result.avg_busbw = _float(m.group("v"), where)
        elif header and _ROW_RE.match(line):
            t = line.split()
            if len(t) != 13:
                raise ParseError(f"{where}: {len(t)} values in a result row, 13 expected "
                                 "(size count type redop root + 4 out-of-place + 4 in-place): "
                                 "a cut or interleaved row")
            row = Row(int(t[0]), int(t[1]), t[2], _float(t[5], where), _float(t[6], where),
                      _float(t[7], where), _wrong(t[8], where), _float(t[9], where),
                      _float(t[10], where), _float(t[11], where), _wrong(t[12], where))
            if result.rows and row.size <= result.rows[-1].size:
                raise ParseError(f"{where}: size {row.size} after {result.rows[-1].size}: "
                                 "two runs in one file? parse each on its own")
            result.rows.append(row)
    if not header:
        raise ParseError(f"{source}: no nccl-tests result header ('# size count type ...'): "
                         "not nccl-tests output, or the run failed before measuring")
    if not result.rows:
        raise ParseError(f"{source}: a result header and no row: the run failed or was cut")
    return result


def check_complete(result: NcclResult, size: int | None = None) -> NcclResult:
    """The result, or :class:`ParseError` when nccl-tests found wrong results,
    did not reach its summary (killed), or has no row at ``size``."""
    wrong = [r.size for r in result.rows if (r.wrong or 0) or (r.in_wrong or 0)]
    if wrong:
        raise ParseError(f"{result.source}: wrong results at {len(wrong)} size(s) "
                         f"(first {wrong[0]} B): NCCL computed bad sums")
    if result.oob_ok is False:
        raise ParseError(f"{result.source}: 'Out of bounds values : {result.out_of_bounds} "
                         "FAILED': results outside the expected range")
    if result.avg_busbw is None:
        raise ParseError(f"{result.source}: no 'Avg bus bandwidth' summary: the run was cut "
                         "off or killed")
    if size is not None:
        result.row(size)
    return result
