"""What a judged figure is: its name, unit, which way is better, and where its
samples come from.

A check declares its figures once, as a tuple of :class:`Figure`; the base
test (:class:`hpcval.rfm.HpcvalTest`) turns that one declaration into the
performance variables, the stored samples (``hpcval-samples.json``) and the
judged points of the stored series. Comparing runs (``hpcval compare``) and
judging history read the direction from :func:`better` too, so "is a larger
number better?" is answered in one place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Units where a smaller number is better (times).
LOWER_IS_BETTER_UNITS = frozenset({"us", "usec", "ms", "s", "ns", "sec"})

#: Words in a figure's name that make a smaller number better whatever its unit
#: (``output_share`` and ``cache_resident`` are fractions where less is better,
#: unlike ``stencil_fraction_of_triad``; ``cpu_busy`` is a cost in %).
LOWER_IS_BETTER_WORDS = frozenset({"cost", "share", "resident", "overhead", "time", "latency",
                                   "lat", "busy", "spread"})

BETTER = ("higher", "lower")


def better(name: str, unit: str | None) -> str:
    """``"lower"`` for times, latencies, costs, shares and spreads, ``"higher"``
    for bandwidths, rates and fractions (from the figure's name and unit)."""
    words = set(re.split(r"[^a-z]+", name.lower()))
    if (unit or "").strip().lower() in LOWER_IS_BETTER_UNITS or words & LOWER_IS_BETTER_WORDS:
        return "lower"
    return "higher"


def lower_is_better(name: str, unit: str | None) -> bool:
    """True where a smaller number of figure ``name`` is better (:func:`better`)."""
    return better(name, unit) == "lower"


@dataclass(frozen=True)
class Figure:
    """One judged figure of a check.

    ``name`` is the performance variable (and the references key), ``unit``
    its unit. ``column``, ``x`` and ``table`` say where a sample is read from
    in the benchmark's output, in the words of the base test that reads it
    (IMB: the benchmark's table, its column, the message size; OMB: column and
    size; a proxy: the key of its result line). ``better`` overrides the
    direction :func:`better` derives from name and unit.
    """

    name: str
    unit: str
    column: str = ""
    x: float | None = None
    table: str = ""
    better: str | None = None

    def __post_init__(self) -> None:
        if self.better is not None and self.better not in BETTER:
            raise ValueError(f"figure {self.name}: better must be one of {BETTER}, "
                             f"not {self.better!r}")

    @property
    def direction(self) -> str:
        """``"higher"`` or ``"lower"``: which way this figure improves."""
        return self.better or better(self.name, self.unit)
