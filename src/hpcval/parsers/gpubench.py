"""Parser for ``gpubench``, hpcval's own CUDA proxy (``proxies/gpubench``).

Each timed repetition is one line, the run ends with a ``done`` line::

    hpcval-gpubench mode=h2d device=0 peer=-1 size=268435456 rep=1 value=24.5 unit=GB/s
    hpcval-gpubench done mode=h2d

``info`` prints ``hpcval-gpubench info device=0 name=NVIDIA_H100 memory_bytes=N
l2_bytes=N cc=9.0``. An error is ``hpcval-gpubench error: WHAT: MESSAGE``.
This format is hpcval's own: the parser is tested on it, and on no output of
a real GPU yet (the proxy has not run on one).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from hpcval.core.errors import ParseError

_LINE_RE = re.compile(r"^hpcval-gpubench mode=(?P<mode>\w+) device=(?P<device>\d+) "
                      r"peer=(?P<peer>-?\d+) size=(?P<size>\d+) rep=(?P<rep>\d+) "
                      r"value=(?P<value>\S+) unit=(?P<unit>\S+)\s*$")
_DONE_RE = re.compile(r"^hpcval-gpubench done mode=(?P<mode>\w+)\s*$")
_ERROR_RE = re.compile(r"^hpcval-gpubench error: (?P<msg>.*)$")
_INFO_RE = re.compile(r"^hpcval-gpubench info (?P<fields>.*)$")

MODES = ("h2d", "d2h", "gemm", "p2p")


@dataclass
class GpuBenchResult:
    source: str
    mode: str = ""
    device: int | None = None
    peer: int | None = None
    size: int | None = None
    unit: str = ""
    values: list[float] = field(default_factory=list)
    done: bool = False
    info: dict[str, str] = field(default_factory=dict)


def parse_gpubench(text: str, source: str = "gpubench output") -> GpuBenchResult:
    """Parse one gpubench run (one mode, one device)."""
    result = GpuBenchResult(source=source)
    for line_no, line in enumerate(text.splitlines(), start=1):
        where = f"{source}:{line_no}"
        if m := _ERROR_RE.match(line):
            raise ParseError(f"{source}: gpubench failed: {m.group('msg')}")
        if m := _INFO_RE.match(line):
            for item in m.group("fields").split():
                key, sep, value = item.partition("=")
                if sep:
                    result.info[key] = value
        elif m := _LINE_RE.match(line):
            mode, unit = m.group("mode"), m.group("unit")
            if result.mode and (mode, unit) != (result.mode, result.unit):
                raise ParseError(f"{where}: mode {mode} ({unit}) after {result.mode} "
                                 f"({result.unit}): two runs in one file")
            try:
                value = float(m.group("value"))
            except ValueError:
                raise ParseError(f"{where}: value {m.group('value')!r} is not a number") \
                    from None
            if not math.isfinite(value) or value <= 0:
                raise ParseError(f"{where}: impossible value {m.group('value')!r}")
            result.mode, result.unit = mode, unit
            result.device, result.peer = int(m.group("device")), int(m.group("peer"))
            result.size = int(m.group("size"))
            result.values.append(value)
        elif m := _DONE_RE.match(line):
            result.done = True
    return result


def check_complete(result: GpuBenchResult, mode: str) -> GpuBenchResult:
    """The result of ``mode``, or :class:`ParseError` when it has no sample or
    stopped before its ``done`` line (a killed run)."""
    if not result.values:
        raise ParseError(f"{result.source}: no gpubench {mode} sample: the proxy did not run "
                         "(see the job's standard error)")
    if result.mode != mode:
        raise ParseError(f"{result.source}: gpubench ran {result.mode}, not {mode}")
    if not result.done:
        raise ParseError(f"{result.source}: gpubench {mode} output ends before 'done': the "
                         "run was cut off")
    return result
