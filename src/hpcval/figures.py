"""What a figure's number means: which direction is better.

One rule for the whole package (comparison, judging, reference capture):
times, latencies, costs, shares and spreads are better smaller; bandwidths,
rates and fractions of a best case are better larger.
"""

from __future__ import annotations

import re

#: Units where a smaller number is better.
LOWER_IS_BETTER_UNITS = {"us", "usec", "ms", "s", "ns", "sec"}

#: Words in a figure's name that make a smaller number better whatever its unit
#: (``output_share`` and ``cache_resident`` are fractions where smaller is
#: better, unlike ``stencil_fraction_of_triad``; ``*_spread`` is a variation).
LOWER_IS_BETTER_WORDS = {"cost", "share", "resident", "overhead", "time", "latency", "lat",
                         "spread"}


def lower_is_better(name: str, unit: str | None) -> bool:
    words = set(re.split(r"[^a-z]+", name.lower()))
    return (unit or "").lower() in LOWER_IS_BETTER_UNITS or bool(words & LOWER_IS_BETTER_WORDS)


def better_direction(name: str, unit: str | None) -> str:
    """``'lower'`` or ``'higher'``: which way the figure ``name`` improves."""
    return "lower" if lower_is_better(name, unit) else "higher"
