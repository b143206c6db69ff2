"""Samples and figures: what a check measured, stored with the run.

Plain functions, each called by one hook or method of
:class:`hpcval.rfm.HpcvalTest`: a declared figure becomes a performance
variable whose value is the median of its samples (:func:`declare_figures`,
:func:`figure_samples`); the samples are stored with their declared direction
(``hpcval-samples.json``, :func:`record_samples`) and a measured series for the
report (:func:`record_series`); outputs are parsed into sanity failures that
name the file (:func:`parse_output`, :func:`parse_samples`); and a figure no
measurement can give (``inf``, a negative time, a bandwidth above the
partition's ceiling) fails the check (:func:`check_figures`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import reframe.utility.osext as osext
import reframe.utility.sanity as sn
from reframe.core.exceptions import SanityError

from hpcval.core.errors import HpcvalError
from hpcval.core.series import median, write_samples, write_series
from hpcval.rfm import launch, outcome


def declare_figures(test: Any) -> None:
    """A performance variable for every declared figure: the median of its
    samples (:meth:`HpcvalTest.figure_value`)."""
    for fig in test.figures:
        test.perf_variables[fig.name] = sn.make_performance_function(
            test.figure_value(fig.name), fig.unit)


def figure_samples(test: Any) -> dict[str, list[float]]:
    """The samples of every declared figure, measured once (the check's
    ``measure()``) and stored."""
    cached: dict[str, list[float]] | None = getattr(test, "_hpcval_samples", None)
    if cached is None:
        measured = test.measure()
        for fig in test.figures:
            values = measured.get(fig.name, [])
            if not values:
                raise SanityError(f"{fig.name}: no sample measured")
            record_samples(test, fig.name, values, fig.unit, fig.direction)
        cached = test._hpcval_samples
    return cached


def figure_value(test: Any, name: str) -> float:
    """A figure's value: the median of its samples."""
    return median(test.figure_samples()[name])


def record_samples(test: Any, variable: str, values: list[float], unit: str,
                   better: str) -> None:
    """Store the samples of a judged figure in ``hpcval-samples.json`` (kept
    with the run) with its declared direction ``better`` (``higher``/``lower``,
    :attr:`hpcval.core.figures.Figure.direction`)."""
    try:
        path = write_samples(test.stagedir, variable, values, unit, better)
    except HpcvalError as err:
        raise SanityError(str(err)) from None
    if not hasattr(test, "_hpcval_samples"):
        test._hpcval_samples = {}
    test._hpcval_samples[variable] = [float(v) for v in values]
    if path.name not in test.keep_files:
        test.keep_files.append(path.name)


def record_series(test: Any, name: str, x_label: str, x_unit: str,
                  columns: dict[str, tuple[str, list[tuple[float, float]]]],
                  judged: dict[str, tuple[str, float]] | None = None) -> None:
    """Store a measured series (e.g. time and bandwidth per message size)
    for the report; ``columns`` maps a label to (unit, [(x, y), ...]) and
    ``judged`` maps a performance variable to the (column, x) it judges,
    so the report can draw its reference band."""
    path = write_series(test.stagedir, name, x_label, x_unit, columns, judged)
    if path.name not in test.keep_files:
        test.keep_files.append(path.name)


def parse_output(path: Path, parser: Any) -> Any:
    """``parser(text, source=path)`` on the output *path*; a missing file or
    a parse failure (garbage, truncation, a benchmark's own error rows)
    becomes a sanity failure carrying the message."""
    try:
        text = path.read_text(errors="replace")
    except OSError as err:
        raise SanityError(f"cannot read {path}: {err.strerror}") from None
    try:
        return parser(text, source=str(path))
    except HpcvalError as err:
        raise SanityError(str(err)) from None


def parse_samples(test: Any, parser: Any, stream: str = "out") -> list[Any]:
    """``parser(text, source=path)`` on the output of every run in the job
    (:func:`hpcval.rfm.launch.sample_outputs`)."""
    return [parse_output(path, parser) for path in launch.sample_outputs(test, stream)]


def bandwidth_ceiling(partition: Any) -> float:
    """The partition's ``extras.max_bandwidth_mbs``: a positive finite
    number, else a config failure (a NaN ceiling would let every
    bandwidth through)."""
    value = partition.extras.get("max_bandwidth_mbs", outcome.DEFAULT_MAX_BANDWIDTH_MBS)
    try:
        ceiling = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        ceiling = math.nan
    if not (math.isfinite(ceiling) and ceiling > 0):
        raise launch.ConfigFailure(
            f"partition {partition.fullname} extras max_bandwidth_mbs: {value!r} is not a "
            "bandwidth ceiling: give a positive number of MB/s (default "
            f"{outcome.DEFAULT_MAX_BANDWIDTH_MBS:g}) in the site config")
    return ceiling


def check_figures(test: Any) -> None:
    """Every figure is a finite, physically possible measurement (no
    ``inf``, no negative time or bandwidth, no bandwidth above the
    partition's ceiling): such a value passes every reference and must
    fail the check instead, named. Judged or recorded, an impossible figure
    is never a measurement."""
    if test.is_dry_run() or not test.perf_variables:
        return
    ceiling = bandwidth_ceiling(test.current_partition)
    values: dict[str, tuple[object, str | None]] = {}
    with osext.change_dir(str(test.stagedir)):
        for name, fn in test.perf_variables.items():
            try:
                values[name] = (sn.evaluate(fn), fn.unit)
            except SanityError:
                raise
            except Exception as err:  # noqa: BLE001 - a figure that cannot be computed
                raise SanityError(f"figure {name} cannot be computed: {err}") from None
    bad = outcome.impossible_figures(values, ceiling)
    if bad:
        raise SanityError("impossible figure(s), not a measurement: " + "; ".join(bad))
