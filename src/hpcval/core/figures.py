"""What a judged figure is: its name, unit, which way is better, and where its
samples come from; and the one vocabulary every reader of figures uses.

A check declares its figures once, as a tuple of :class:`Figure`; the base
test (:class:`hpcval.rfm.HpcvalTest`) turns that one declaration into the
performance variables, the stored samples (``hpcval-samples.json``, with the
declared direction) and the judged points of the stored series. Everything
that reads figures afterwards (the results store, ``hpcval compare``,
``hpcval references capture``, the report, vetting) takes the direction stored
with the samples (:func:`stored_direction`) and never guesses it from a name.

This module imports nothing of hpcval: it is the ground floor.

* **Units and their kinds** (:data:`UNITS`): a time (smaller is better, never
  negative), a bandwidth (larger is better, never negative, below the
  partition's ceiling), a rate (larger is better), a percentage or a fraction
  (no direction of its own: the figure declares it).
* **Direction**: ``higher`` or ``lower`` (:data:`BETTER`), declared by the
  figure or given by its unit's kind (:func:`unit_direction`).
* **Signed**: a difference of two measurements may go below zero
  (:func:`may_be_negative`).
* **Impossibility** (:func:`impossible_figure`): what no measurement can be.
* **Bands** (:func:`band_bounds`): a reference with relative thresholds as
  absolute bounds, as ReFrame computes them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

BETTER = ("higher", "lower")


@dataclass(frozen=True)
class Unit:
    """What a unit measures: its ``kind``, the direction that kind improves
    in (``None`` where the figure must declare it), and for a bandwidth its
    size in MB/s (10^6 bytes per second), for the ceiling."""

    kind: str
    direction: str | None
    mbs: float = 0.0


_TIME = Unit("time", "lower")
_RATE = Unit("rate", "higher")

#: Every unit a figure may have: times, bandwidths, rates, percentages and fractions.
UNITS: dict[str, Unit] = {
    **{u: _TIME for u in ("ns", "us", "usec", "ms", "s", "sec", "min", "h")},
    **{u: Unit("bandwidth", "higher", mbs) for u, mbs in {
        "B/s": 1e-6, "KB/s": 1e-3, "MB/s": 1.0, "GB/s": 1e3, "TB/s": 1e6,
        "KiB/s": 1.024e-3, "MiB/s": 1.048576, "GiB/s": 1073.741824, "Mbytes/sec": 1.0,
        "Gb/s": 125.0, "Mb/s": 0.125, "Gbit/s": 125.0, "Mbit/s": 0.125}.items()},
    **{u: _RATE for u in ("msg/s", "messages/s", "op/s", "model_s/s", "GFLOP/s", "TFLOP/s", "MHz")},
    "%": Unit("percent", None),
    "fraction": Unit("fraction", None),
}

#: Units of times: a measured time is never negative.
TIME_UNITS = frozenset(u for u, k in UNITS.items() if k.kind == "time")

#: Bandwidth units in MB/s (10^6 bytes per second), for the ceiling.
BANDWIDTH_UNITS: dict[str, float] = {u: k.mbs for u, k in UNITS.items() if k.kind == "bandwidth"}

#: Default ceiling of a bandwidth figure, in MB/s: 10 TB/s, beyond any
#: memory or network transport of a node today. A partition sets its own with
#: ``extras.max_bandwidth_mbs`` (e.g. a 1 GbE lab link: 125).
DEFAULT_MAX_BANDWIDTH_MBS = 1e7

#: Kinds a measurement of can never be below zero, with their noun in messages.
_NON_NEGATIVE = {"time": "time", "bandwidth": "bandwidth", "percent": "share"}

#: Figures that may go below zero: differences of two measured times.
_SIGNED = re.compile(r"cost|overhead|change|delta|diff|gain|saving", re.IGNORECASE)


def unit_kind(unit: str | None) -> str | None:
    """The kind of ``unit`` (``time``, ``bandwidth``, ``rate``, ``percent``,
    ``fraction``), ``None`` for a unit hpcval does not know."""
    known = UNITS.get((unit or "").strip())
    return known.kind if known else None


def unit_direction(unit: str | None) -> str | None:
    """The direction the kind of ``unit`` improves in: ``lower`` for times,
    ``higher`` for bandwidths and rates; ``None`` where the unit alone does
    not say (a percentage, a fraction, an unknown unit)."""
    known = UNITS.get((unit or "").strip())
    return known.direction if known else None


def check_direction(direction: object, what: str) -> str:
    """``direction`` if it is ``higher`` or ``lower``, else :class:`ValueError`
    naming ``what``."""
    if direction not in BETTER:
        raise ValueError(f"{what}: better must be one of {BETTER}, not {direction!r}")
    return str(direction)


def stored_direction(stored: object, unit: str | None) -> str | None:
    """The direction of a stored figure: the one stored with its samples
    (declared by its check). Data stored before directions were stored (no
    samples file) has none: its unit's kind decides where it can
    (:func:`unit_direction`); otherwise ``None``: the direction is unknown,
    and no name is read to guess it."""
    if stored in BETTER:
        return str(stored)
    return unit_direction(unit)


def worse_change(change: float, direction: str) -> float:
    """A relative change signed so that positive is worse: ``-change`` for a
    figure where higher is better."""
    return -change if direction == "higher" else change


def may_be_negative(name: str) -> bool:
    """A figure that is a difference of two measurements (a cost, a gain, a
    change) may go below zero."""
    return bool(_SIGNED.search(name))


def impossible_figure(name: str, value: object, unit: str | None,
                      max_bandwidth_mbs: float = DEFAULT_MAX_BANDWIDTH_MBS) -> str | None:
    """Why a figure cannot be a measurement (not a number, not finite,
    a negative time, bandwidth or percentage, a bandwidth above the ceiling),
    or ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{name} = {value!r} is not a number"
    if not math.isfinite(value):
        return f"{name} = {value} {unit or ''} is not finite".replace("  ", " ")
    unit = unit or ""
    noun = _NON_NEGATIVE.get(unit_kind(unit) or "")
    if value < 0 and noun and not may_be_negative(name):
        return f"{name} = {value:g} {unit} is negative: a {noun} cannot be"
    if unit in BANDWIDTH_UNITS and value * BANDWIDTH_UNITS[unit] > max_bandwidth_mbs:
        return (f"{name} = {value:g} {unit} is above the ceiling of {max_bandwidth_mbs:g} MB/s "
                "for this partition (extras.max_bandwidth_mbs): not a measurement")
    return None


def impossible_figures(values: Mapping[str, tuple[object, str | None]],
                       max_bandwidth_mbs: float = DEFAULT_MAX_BANDWIDTH_MBS) -> list[str]:
    """:func:`impossible_figure` over ``{name: (value, unit)}``."""
    found = []
    for name, (value, unit) in values.items():
        why = impossible_figure(name, value, unit, max_bandwidth_mbs)
        if why:
            found.append(why)
    return found


def band_bounds(reference: float | None, lower: float | None, upper: float | None,
                ) -> tuple[float | None, float | None]:
    """Absolute (low, high) bounds of a reference with relative thresholds,
    as ReFrame computes them (``None``: unbounded on that side)."""

    def bound(thres: float | None) -> float | None:
        if thres is None or reference is None:
            return None
        if reference == 0:
            return thres
        return reference * (1 + thres) if reference > 0 else reference * (1 - thres)

    return bound(lower), bound(upper)


def worse_side_band(tolerance: float, direction: str | None) -> tuple[float | None, float | None]:
    """Relative ``(lower, upper)`` thresholds bounding only the worse side of
    a figure by ``tolerance`` (a faster run never fails); both sides where the
    direction is unknown."""
    if direction is None:
        return -tolerance, tolerance
    return (None, tolerance) if direction == "lower" else (-tolerance, None)


@dataclass(frozen=True)
class Figure:
    """One judged figure of a check.

    ``name`` is the performance variable (and the references key), ``unit``
    its unit. ``column``, ``x`` and ``table`` say where a sample is read from
    in the benchmark's output, in the words of the base test that reads it
    (IMB: the benchmark's table, its column, the message size; OMB: column and
    size; a proxy: the key of its result line). ``better`` is the direction;
    left out, the unit's kind gives it (times lower, bandwidths and rates
    higher), and a figure whose unit has no direction (``%``, ``fraction``)
    must declare it.
    """

    name: str
    unit: str
    column: str = ""
    x: float | None = None
    table: str = ""
    better: str | None = None

    def __post_init__(self) -> None:
        if self.better is not None:
            check_direction(self.better, f"figure {self.name}")
        elif unit_direction(self.unit) is None:
            raise ValueError(f"figure {self.name}: unit {self.unit!r} does not say which way is "
                             f"better: declare better= one of {BETTER}")

    @property
    def direction(self) -> str:
        """``"higher"`` or ``"lower"``: which way this figure improves."""
        return self.better or str(unit_direction(self.unit))
