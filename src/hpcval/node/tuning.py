"""Collective algorithm tuning for Intel MPI, as in "Getting higher MPI
performance for HPC applications on Google Cloud".

That article tunes Intel MPI's collective algorithms per node count × ranks per
node (``mpitune``). hpcval does the same with IMB: the sweep check runs one
collective with every ``I_MPI_ADJUST_<COLLECTIVE>`` preset Intel MPI offers
(the range is read from ``impi_info`` on the node), and this module picks the
fastest preset per message size, merges neighbouring sizes with the same
winner into bands, and writes the setting Intel MPI understands::

    I_MPI_ADJUST_ALLREDUCE="12:0-8;3:9-4096;2:4097-2147483647"

Sweep output: before each IMB run the job prints ``HPCVAL-ALGORITHM <id>``
(``0`` = Intel MPI's own choice, the default).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcval.core.errors import ParseError, SiteError
from hpcval.core.yamlio import load_yaml_bounded
from hpcval.parsers.imb import check_complete, parse_imb

MARKER = "HPCVAL-ALGORITHM"
#: Largest message size Intel MPI's conditions accept (the open upper end).
OPEN_END = 2147483647
_MARKER_RE = re.compile(rf"^{MARKER} (\d+)\s*$", re.MULTILINE)


def variable_name(collective: str) -> str:
    return f"I_MPI_ADJUST_{collective.upper()}"


def parse_labelled_runs(text: str, collective: str, source: str = "sweep output"
                        ) -> list[tuple[int, dict[int, float]]]:
    """[(label, {message size: t_avg in us})] for each IMB run of a job, in
    order, each run preceded by its ``HPCVAL-ALGORITHM <label>`` line."""
    marks = list(_MARKER_RE.finditer(text))
    if not marks:
        raise ParseError(f"{source}: no '{MARKER}' lines: the sweep did not run")
    runs = []
    for mark, nxt in zip(marks, [*marks[1:], None], strict=True):
        label = int(mark.group(1))
        chunk = text[mark.end():nxt.start() if nxt else len(text)]
        where = f"{source} ({variable_name(collective)}={label})"
        table = check_complete(parse_imb(chunk, where), collective, [], source=where)
        column = "t_avg_usec" if "t_avg_usec" in table.columns else "t_usec"
        runs.append((label, dict(table.series(column))))
    sizes = sorted(runs[0][1])
    for label, row in runs:
        if sorted(row) != sizes:
            raise ParseError(f"{source}: run {label} measured sizes {sorted(row)}, the first "
                             f"run {sizes}")
    return runs


def parse_sweep(text: str, collective: str, source: str = "sweep output"
                ) -> dict[int, dict[int, float]]:
    """{algorithm: {message size: t_avg in us}} from a sweep job's output."""
    times = dict(parse_labelled_runs(text, collective, source))
    if 0 not in times:
        raise ParseError(f"{source}: the sweep has no run with the default (algorithm 0)")
    return times


def tuned_vs_default_pct(runs: list[tuple[int, dict[int, float]]]) -> list[float]:
    """For alternating default (label 0) / tuned (label 1) runs: the tuned
    run's total time over all sizes in % of the default run before it."""
    ratios = []
    for (a, default), (b, tuned) in zip(runs[::2], runs[1::2], strict=False):
        if (a, b) != (0, 1):
            raise ParseError(f"runs must alternate default (0) and tuned (1), got {a}, {b}")
        ratios.append(100.0 * sum(tuned.values()) / sum(default.values()))
    if not ratios:
        raise ParseError("no default/tuned pair of runs")
    return ratios


@dataclass(frozen=True)
class Band:
    """Message sizes ``lo``..``hi`` (bytes) where ``algorithm`` was fastest."""

    algorithm: int
    lo: int
    hi: int
    best_us: float
    default_us: float

    @property
    def gain_pct(self) -> float:
        return 100.0 * (self.default_us - self.best_us) / self.default_us \
            if self.default_us else 0.0


def best_bands(times: Mapping[int, Mapping[int, float]]) -> list[Band]:
    """Fastest explicit preset per size, neighbouring sizes with the same
    winner merged; a band's upper end is the next measured size minus one,
    the last band is open-ended."""
    candidates = {a: t for a, t in times.items() if a != 0}
    if not candidates:
        raise ParseError("the sweep measured no explicit algorithm")
    sizes = sorted(times[0])
    winners = [min(candidates, key=lambda a, s=s: (candidates[a][s], a)) for s in sizes]
    bands: list[Band] = []
    for i, (size, alg) in enumerate(zip(sizes, winners, strict=True)):
        hi = sizes[i + 1] - 1 if i + 1 < len(sizes) else OPEN_END
        best, default = candidates[alg][size], times[0][size]
        if bands and bands[-1].algorithm == alg:
            prev = bands[-1]
            bands[-1] = Band(alg, prev.lo, hi, prev.best_us + best, prev.default_us + default)
        else:
            bands.append(Band(alg, 0 if not bands else size, hi, best, default))
    return bands


def setting(collective: str, bands: list[Band]) -> str:
    """The value of ``I_MPI_ADJUST_<COLLECTIVE>`` for these bands."""
    return ";".join(f"{b.algorithm}:{b.lo}-{b.hi}" for b in bands)


def mean_gain_pct(times: Mapping[int, Mapping[int, float]]) -> float:
    """Time saved by the per-size winners against the default, summed over
    sizes, in % of the default (negative: the default beats every preset)."""
    bands = best_bands(times)
    default = sum(b.default_us for b in bands)
    return 100.0 * (default - sum(b.best_us for b in bands)) / default if default else 0.0


#: What to do about a wrong tuned settings file, in every message about one.
_REWRITE = ("write the file again with `hpcval tune collectives --write`, or delete the "
            "entry (the tuned check then skips that collective)")


def load_tuning(path: str | Path) -> dict[str, Any]:
    """A site's tuned settings: ``{collective: {setting, ranks, nodes}}``."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SiteError(f"{path}: no tuned settings (run `hpcval tune collectives --write`)") \
            from None
    except OSError as err:
        raise SiteError(f"{path}: cannot read tuned settings: {err.strerror}") from None
    return load_tuning_text(raw, path)


def load_tuning_text(text: str | bytes, path: str | Path) -> dict[str, Any]:
    """Validate tuned settings given as YAML text (``path`` names them): each
    collective's ``setting`` in Intel MPI's ``<alg>:<lo>-<hi>[;...]`` form, its
    ``ranks`` and ``nodes``, where given, positive whole numbers. Errors name
    the file and the key, in one line."""

    def error(file: str, where: str, reason: str) -> SiteError:
        return SiteError(f"{file}: {where + ': ' if where else ''}{reason}")

    raw = text.encode() if isinstance(text, str) else text
    data = load_yaml_bounded(raw, str(path), error) or {}
    if not isinstance(data, dict) or not data:
        raise SiteError(f"{path}: must map collectives to their tuned settings "
                        f"({{Allreduce: {{setting: ..., ranks: N, nodes: N}}}}); {_REWRITE}")
    for coll, entry in data.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("setting"), str):
            raise SiteError(f"{path}: {coll}.setting: missing or not a string; {_REWRITE}")
        if not re.fullmatch(r"\d+:\d+-\d+(;\d+:\d+-\d+)*", entry["setting"]):
            raise SiteError(f"{path}: {coll}.setting: {entry['setting']!r} is not "
                            f"'<alg>:<lo>-<hi>[;...]'; {_REWRITE}")
        for key in ("ranks", "nodes"):
            value = entry.get(key)
            if key in entry and (not isinstance(value, int) or isinstance(value, bool)
                                 or value < 1):
                raise SiteError(f"{path}: {coll}.{key}: {value!r} is not a positive whole "
                                f"number; {_REWRITE}")
    return data
