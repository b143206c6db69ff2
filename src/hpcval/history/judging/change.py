"""One change, one way: a relative change B/A - 1 with its interval, and its text.

Every surface that prints how much a figure moved (validate's verdict lines, the
report, history, trend, compare, export) takes a :class:`Change` and prints
:meth:`Change.text`, so the same runs give the same number everywhere.

The estimate lives on the log scale (log run medians or log samples); a
difference ``d`` of logs with its interval ``[lo, hi]`` becomes
``Change.from_log(d, lo, hi, level)``: ``exp(d) - 1`` and the bounds alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


def sig3(v: Any) -> str:
    """A number to 3 significant digits with thousands separators (18,700; 1.41)."""
    if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
        return "-"
    if v == 0:
        return "0"
    mag = math.floor(math.log10(abs(v)))
    decimals = max(0, 2 - mag)
    rounded = round(v, 2 - mag)
    if rounded != 0 and math.floor(math.log10(abs(rounded))) > mag:  # 9.996 -> 10.0
        decimals = max(0, decimals - 1)
    return f"{rounded:,.{decimals}f}"


def signed_pct(v: Any) -> str:
    """A relative change as a signed percentage, 3 significant digits: ``-14.8 %``."""
    if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
        return "-"
    return ("+" if v >= 0 else "-") + sig3(abs(100 * v)) + " %"


@dataclass(frozen=True)
class Change:
    """A relative change ``now / before - 1`` (negative: the value got smaller).

    ``low``/``high`` bound it at confidence ``level`` (both ``None``: no interval,
    e.g. one run per side)."""

    change: float
    low: float | None = None
    high: float | None = None
    level: float | None = None

    @classmethod
    def from_log(cls, diff: float, low: float | None = None, high: float | None = None,
                 level: float | None = None) -> Change:
        """From a difference of logs and its interval on the log scale."""
        lo = math.expm1(low) if low is not None else None
        hi = math.expm1(high) if high is not None else None
        return cls(math.expm1(diff), lo, hi, level)

    @classmethod
    def from_detail(cls, d: dict[str, Any]) -> Change | None:
        """From a stored verdict's detail (``change``, ``ci_low``, ``ci_high``, ``ci_level``)."""
        c = d.get("change")
        if not isinstance(c, int | float) or isinstance(c, bool):
            return None

        def num(key: str) -> float | None:
            v = d.get(key)
            return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

        low, high = num("ci_low"), num("ci_high")
        if low is None or high is None:
            low = high = None
        return cls(float(c), low, high, num("ci_level"))

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def text(self) -> str:
        """``-14.8 % [-16.0 .. -13.5] (95 %)``; the change alone when it has no interval."""
        out = signed_pct(self.change)
        if self.has_interval:
            lo = signed_pct(self.low).removesuffix(" %")
            hi = signed_pct(self.high).removesuffix(" %")
            out += f" [{lo} .. {hi}]"
            if self.level is not None:
                lvl = sig3(100 * self.level)
                lvl = lvl.rstrip("0").rstrip(".") if "." in lvl else lvl
                out += f" ({lvl} %)"
        return out
