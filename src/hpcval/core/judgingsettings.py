"""Statistical settings of a site: ``site-configs/<site>/judging.yaml``.

::

    k: 5                 # accepted runs in the baseline (a figure with fewer: no-baseline)
    threshold: 5%        # practical threshold: smaller changes are never `regressed`
    alpha: 0.05          # false-alarm level per run (family-wise with holm)
    correction: holm     # holm (family-wise) or bh (false discovery rate)
    min_spread: 0.005    # floor of the run-to-run spread (log scale, ~0.5 %)
    spread_runs: 30      # accepted runs the run-to-run spread is estimated from
    unstable: 3          # within-run spread grown by this factor (and significantly): unstable
    unstable_fails: true # an `unstable` figure fails the run like `regressed`
    hold_factor: 2       # a run whose figure moved by this factor (either way) is held
                         # out of baselines until a person accepts it (0: never held)
    statistic: median    # the run statistic: median, fast (the fast mode) or auto
    families:            # figures judged together (one test), by glob; first match wins
      network: ["imb_pingpong_*/bw_*", "imb_pingpong_*/lat_64KiB"]
    figures:             # overrides by glob on "<check>/<variable>", first match wins
      "imb_pingpong_*/lat_*": {threshold: 25%}
      "*/bw_4MiB": {k: 10}

Every key is optional; a missing file means the defaults. Thresholds are
fractions (``0.05``) or per cent strings (``"5%"``).

It lives on the ground floor because a site (:class:`hpcval.site.Site`)
checks its ``judging.yaml`` as it checks its other files, and the statistics
(:mod:`hpcval.history.judging`, which re-exports it as its ``settings``) judge
with it: both stand on it, neither on the other.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hpcval.core.errors import InputError

CORRECTIONS = ("holm", "bh")
#: Keys that may appear at the top level and (except ``correction``) per figure.
FIGURE_KEYS = ("k", "threshold", "alpha", "min_spread", "spread_runs", "unstable",
               "hold_factor", "statistic")
#: Run statistics (docs/judging.md, "Which statistic"): the median of a run's
#: samples; ``fast``: the fast mode (a quantile on the figure's better side) and
#: the share of samples in the slow mode; ``auto``: ``fast`` where the samples
#: are two-moded (the figure's history shows a gap), else the median.
STATISTICS = ("median", "fast", "auto")
TOP_KEYS = (*FIGURE_KEYS, "correction", "unstable_fails", "families", "figures")


@dataclass(frozen=True)
class FigureSettings:
    """The settings that apply to one figure."""

    k: int = 5
    threshold: float = 0.05
    alpha: float = 0.05
    min_spread: float = 0.005
    spread_runs: int = 30
    unstable: float = 3.0
    hold_factor: float = 2.0
    statistic: str = "auto"


@dataclass(frozen=True)
class JudgingSettings:
    """A site's judging settings: defaults plus per-figure overrides."""

    k: int = 5
    threshold: float = 0.05
    alpha: float = 0.05
    correction: str = "holm"
    min_spread: float = 0.005
    spread_runs: int = 30
    unstable: float = 3.0
    hold_factor: float = 2.0
    statistic: str = "auto"
    unstable_fails: bool = True
    #: ``(glob on "check/variable", overrides)``, first match wins
    overrides: tuple[tuple[str, Mapping[str, float]], ...] = field(default_factory=tuple)
    #: ``(family name, globs)``: figures judged together; first match wins
    families: tuple[tuple[str, tuple[str, ...]], ...] = field(default_factory=tuple)

    def family_of(self, key: str) -> str | None:
        """The family ``judging.yaml`` puts figure ``key`` in, or ``None`` (default grouping)."""
        for name, globs in self.families:
            if any(fnmatch.fnmatchcase(key, g) for g in globs):
                return name
        return None

    def for_figure(self, key: str) -> FigureSettings:
        """Settings of figure ``key`` (``"<check>/<variable>"``)."""
        base = FigureSettings(self.k, self.threshold, self.alpha, self.min_spread,
                              self.spread_runs, self.unstable, self.hold_factor,
                              self.statistic)
        for pattern, values in self.overrides:
            if fnmatch.fnmatchcase(key, pattern):
                return replace(base, **values)
        return base

    def unmatched(self, names: Iterable[str]) -> list[tuple[str, str]]:
        """The globs that match none of ``names``, each with the key it is
        under: ``("figures", glob)`` or ``("families: <name>", glob)``."""
        names = list(names)
        patterns = [("figures", p) for p, _ in self.overrides] + \
            [(f"families: {name}", g) for name, gs in self.families for g in gs]
        return [(key, pattern) for key, pattern in patterns
                if not any(fnmatch.fnmatchcase(n, pattern) for n in names)]

    @classmethod
    def load(cls, path: str | Path) -> JudgingSettings:
        """Settings from ``path``; the defaults if the file does not exist."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls()
        except OSError as err:
            raise InputError(f"{path}: cannot read ({err.strerror})") from None
        from hpcval.core.yamlio import load_yaml_bounded

        def error(where_path: str, where: str, reason: str) -> InputError:
            return InputError(f"{where_path}:{f' {where}:' if where else ''} {reason}")

        data = load_yaml_bounded(raw, str(path), error)
        return cls.from_mapping(data if data is not None else {}, str(path))

    @classmethod
    def from_mapping(cls, data: Any, source: str = "judging settings") -> JudgingSettings:
        if not isinstance(data, Mapping):
            raise InputError(f"{source}: expected a mapping of settings "
                             f"({', '.join(TOP_KEYS)}), got {type(data).__name__}")
        unknown = sorted(str(k) for k in data if k not in TOP_KEYS)
        if unknown:
            raise InputError(f"{source}: {unknown[0]}: unknown setting; "
                             f"use one of {', '.join(TOP_KEYS)}")
        values = _figure_values(data, source, "")
        correction = data.get("correction", "holm")
        if correction not in CORRECTIONS:
            raise InputError(f"{source}: correction: '{correction}' is not known; "
                             f"use {' or '.join(CORRECTIONS)}")
        figures = data.get("figures") or {}
        if not isinstance(figures, Mapping):
            raise InputError(f"{source}: figures: expected a mapping of "
                             "'<check>/<variable>' globs to settings")
        overrides: list[tuple[str, Mapping[str, float]]] = []
        for pattern, entry in figures.items():
            key = f"figures: {pattern}"
            if not isinstance(pattern, str) or "/" not in pattern:
                raise InputError(f"{source}: {key}: a figure is named '<check> %<param>=<value>"
                                 "@<system>:<partition>+<environ>/<variable>'; write a glob "
                                 "such as 'imb_pingpong_*/lat_*'")
            if not isinstance(entry, Mapping):
                raise InputError(f"{source}: {key}: expected a mapping of settings "
                                 f"({', '.join(FIGURE_KEYS)})")
            bad = sorted(str(k) for k in entry if k not in FIGURE_KEYS)
            if bad:
                raise InputError(f"{source}: {key}: {bad[0]}: unknown figure setting; "
                                 f"use one of {', '.join(FIGURE_KEYS)}")
            overrides.append((pattern, _figure_values(entry, source, f"{key}: ")))
        fails = data.get("unstable_fails", True)
        if not isinstance(fails, bool):
            raise InputError(f"{source}: unstable_fails: '{_shown(fails)}' must be true or false")
        return cls(correction=correction, overrides=tuple(overrides),
                   families=_families(data.get("families"), source), unstable_fails=fails,
                   **values)


def _families(raw: Any, source: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if raw is None:
        return ()
    usage = ("expected a mapping of family names to lists of '<check>/<variable>' globs, "
             "e.g. network: ['imb_pingpong_*/bw_*']")
    if not isinstance(raw, Mapping):
        raise InputError(f"{source}: families: {usage}")
    out = []
    for name, globs in raw.items():
        if isinstance(globs, str):
            globs = [globs]
        if (not isinstance(name, str) or not name or not isinstance(globs, list) or not globs
                or not all(isinstance(g, str) and "/" in g for g in globs)):
            raise InputError(f"{source}: families: {_shown(name)}: {usage}")
        out.append((name, tuple(globs)))
    return tuple(out)


def _figure_values(data: Mapping[str, Any], source: str, prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "k" in data:
        k = data["k"]
        if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= 1000:
            quoted = " written without quotes" if isinstance(k, str) and k.isdigit() else ""
            raise InputError(f"{source}: {prefix}k: '{_shown(k)}' must be a whole number of "
                             f"runs{quoted} from 2 to 1000 (the run-to-run spread needs 2)")
        out["k"] = k
    if "spread_runs" in data:
        n = data["spread_runs"]
        if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= 1000:
            raise InputError(f"{source}: {prefix}spread_runs: '{_shown(n)}' must be a whole "
                             "number of runs from 2 to 1000 (the window of the run-to-run "
                             "spread; 30 by default)")
        out["spread_runs"] = n
    if "unstable" in data:
        f = data["unstable"]
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not (f == 0 or f >= 1):
            raise InputError(f"{source}: {prefix}unstable: '{_shown(f)}' must be a factor of at "
                             "least 1 such as 3 (within-run spread grown 3x), or 0 to judge no "
                             "stability")
        out["unstable"] = float(f)
    if "hold_factor" in data:
        f = data["hold_factor"]
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not (f == 0 or f > 1):
            raise InputError(f"{source}: {prefix}hold_factor: '{_shown(f)}' must be a factor "
                             "above 1 such as 2 (a figure moved 2x holds its run out of "
                             "baselines until a person accepts it), or 0 to hold no run")
        out["hold_factor"] = float(f)
    if "statistic" in data:
        st = data["statistic"]
        if st not in STATISTICS:
            raise InputError(f"{source}: {prefix}statistic: '{_shown(st)}' is not known; use "
                             f"{', '.join(STATISTICS)} (docs/judging.md, 'Which statistic')")
        out["statistic"] = st
    for name, low, high in (("threshold", 0.0, 1.0), ("alpha", 0.0, 0.5),
                            ("min_spread", 0.0, 1.0)):
        if name in data:
            value = _fraction(data[name])
            if value is None or not low <= value < high or (name == "alpha" and value == 0):
                bounds = f"(0, {high:g})" if name == "alpha" else f"[{low:g}, {high:g})"
                raise InputError(
                    f"{source}: {prefix}{name}: '{_shown(data[name])}' must be a fraction in "
                    f"{bounds} such as 0.05 or a percentage such as '5%'")
            out[name] = value
    return out


def _shown(value: Any) -> str:
    """A value as it was written in YAML (null, true), not as Python prints it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _fraction(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None
