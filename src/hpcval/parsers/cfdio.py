"""Parser for the result line of hpcval's ``cfdio`` proxy (proxies/cfdio).

Rank 0 prints exactly one line per run::

    CFDIO mode=stencil strategy=mpiio ranks=2 ... output_s=4.58e-02 ... checksum=f1ac... verified=1
    CFDIO mode=triad ranks=2 n_per_rank=5000000 ... triad_MBs=17227.5 valid=1
    CFDIO mode=read readers=2 bytes_per_reader=67108864 ... reader_MBs=1524.4,1529.2 ...

A stencil run with ``--with-triad`` adds ``triad_MBs``, ``stencil_fraction`` and
``valid``. ``reader_MBs`` (per-reader read bandwidth, comma-separated) becomes a
list of floats.

Values that look like numbers become floats (``ranks``/``steps``-like counts
stay ints); ``checksum``, ``dims``, ``grid``, ``strategy`` and ``mode`` stay
strings. A run that failed prints ``cfdio: ...`` messages on stderr and no
result line; :func:`parse_cfdio` then raises ParseError quoting them.
"""

from __future__ import annotations

import re

from hpcval.core.errors import ParseError

_LINE_RE = re.compile(r"^CFDIO\s+(?P<body>.*)$", re.MULTILINE)
_PAIR_RE = re.compile(r"(\w+)=(\S+)")
_STRINGS = {"mode", "strategy", "dims", "grid", "checksum"}
_INTS = {"ranks", "steps", "every", "outputs", "reps", "n_per_rank", "verified", "kept", "valid",
         "readers", "bytes_per_reader"}
_LISTS = {"reader_MBs"}
STRATEGIES = ("none", "per-rank-then-gather", "gather-to-root", "mpiio")
_REQUIRED = {
    "stencil": ("strategy", "ranks", "grid", "steps", "total_s", "compute_s", "halo_s",
                "output_s", "bytes_written", "write_MBs", "stencil_MBs", "checksum",
                "verified"),
    "triad": ("ranks", "n_per_rank", "best_s", "triad_MBs", "valid"),
    "read": ("readers", "bytes_per_reader", "total_s", "reader_MBs", "min_reader_MBs",
             "max_reader_MBs", "aggregate_MBs", "cache_resident", "verified"),
}


def _convert(key: str, value: str) -> str | int | float | list[float]:
    if key in _STRINGS:
        return value
    try:
        if key in _LISTS:
            return [float(v) for v in value.split(",")]
        return int(value) if key in _INTS else float(value)
    except ValueError as exc:
        raise ParseError(f"cfdio: field {key}={value!r} is not a number") from exc


def parse_cfdio(text: str, source: str = "<stdout>") -> dict:
    """Return the fields of the single ``CFDIO`` line in *text*.

    Raises ParseError when there is no line (quoting the proxy's error
    messages), more than one, a required field is missing, or the proxy
    reports that verification failed."""
    lines = _LINE_RE.findall(text)
    if not lines:
        errors = [ln.strip() for ln in text.splitlines() if ln.startswith("cfdio:")]
        usage = any(ln.startswith("usage: cfdio") for ln in text.splitlines())
        if errors:
            why = "; ".join(errors)
        elif usage:
            why = ("cfdio rejected its options and printed its usage: the binary is older "
                   "than the check (rebuild it, e.g. spack install)")
        else:
            why = "output truncated or not from cfdio"
        raise ParseError(f"{source}: no CFDIO result line ({why})")
    if len(lines) > 1:
        raise ParseError(f"cfdio: {len(lines)} CFDIO result lines, expected one")
    fields = {k: _convert(k, v) for k, v in _PAIR_RE.findall(lines[0])}
    mode = fields.get("mode")
    if mode not in _REQUIRED:
        raise ParseError(f"cfdio: unknown mode {mode!r}")
    missing = [k for k in _REQUIRED[str(mode)] if k not in fields]
    if missing:
        raise ParseError(f"cfdio: result line lacks {', '.join(missing)} (truncated?)")
    if mode == "stencil":
        if fields["strategy"] not in STRATEGIES:
            raise ParseError(f"cfdio: unknown strategy {fields['strategy']!r}")
        if fields["verified"] != 1:
            raise ParseError("cfdio: written file did not match the field (verified=0)")
        if "stencil_fraction" in fields and fields.get("valid") != 1:
            raise ParseError("cfdio: triad result is wrong (valid=0)")
    elif mode == "read":
        if fields["verified"] != 1:
            raise ParseError("cfdio: data read back did not match what was written "
                             "(verified=0)")
        if len(fields["reader_MBs"]) != fields["readers"]:  # type: ignore[arg-type]
            raise ParseError(f"cfdio: {len(fields['reader_MBs'])} reader bandwidths for "  # type: ignore[arg-type]
                             f"{fields['readers']} readers (truncated?)")
    elif fields["valid"] != 1:
        raise ParseError("cfdio: triad result is wrong (valid=0)")
    return fields


def output_cost(with_output: dict, without: dict) -> tuple[float, float]:
    """Output cost (run time with output − without, seconds) and the share of
    the run spent writing (output_s / total_s of the run with output)."""
    cost = float(with_output["total_s"]) - float(without["total_s"])
    total = float(with_output["total_s"])
    share = float(with_output["output_s"]) / total if total > 0 else 0.0
    return cost, share
