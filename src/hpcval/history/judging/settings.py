"""The judging settings (``judging.yaml``): :mod:`hpcval.core.judgingsettings`,
under the statistics' own name."""

from hpcval.core.judgingsettings import (
    CORRECTIONS,
    FigureSettings,
    JudgingSettings,
)

__all__ = ["CORRECTIONS", "FigureSettings", "JudgingSettings"]
