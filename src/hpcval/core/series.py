"""What a check stores beside its figures, per run: the measured series
(``hpcval-series.json``: e.g. time and bandwidth per message size) and the
samples of every judged figure (``hpcval-samples.json``).

Both files are written in the test's stage directory, kept by ReFrame in its
output directory, and read back by reports, comparisons and the results
store. This module needs no ReFrame, so reading results never imports it.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hpcval.core.errors import HpcvalError
from hpcval.core.figures import BETTER

SERIES_FILE = "hpcval-series.json"
SAMPLES_FILE = "hpcval-samples.json"

#: Every judged figure is backed by at least this many samples per run.
MIN_SAMPLES = 5


def _update(path: Path, key: str, value: Any) -> None:
    """Set ``key`` in the JSON object stored at *path*, atomically."""
    data: dict[str, Any] = {}
    if path.exists():
        data = json.loads(path.read_text())
    data[key] = value
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def write_series(directory: str | Path, name: str, x_label: str, x_unit: str,
                 columns: dict[str, tuple[str, list[tuple[float, float]]]],
                 judged: dict[str, tuple[str, float]] | None = None) -> Path:
    """Store series *name*: ``columns`` maps a label to (unit, [(x, y), ...]);
    ``judged`` maps a performance variable to the (column, x) it judges."""
    path = Path(directory) / SERIES_FILE
    _update(path, name, {
        "x_label": x_label,
        "x_unit": x_unit,
        "columns": {k: {"unit": u, "points": pts} for k, (u, pts) in columns.items()},
        "judged": {v: {"column": c, "x": x} for v, (c, x) in (judged or {}).items()},
    })
    return path


def write_samples(directory: str | Path, variable: str, values: list[float], unit: str,
                  direction: str) -> Path:
    """Store the samples of one figure with its declared direction:
    ``{"<variable>": {"unit", "better", "samples"}}`` in ``hpcval-samples.json``."""
    if direction not in BETTER:
        raise HpcvalError(f"{variable}: better must be one of {BETTER}, not {direction!r}")
    path = Path(directory) / SAMPLES_FILE
    _update(path, variable, {"unit": unit, "better": direction,
                             "samples": [float(v) for v in values]})
    return path


def _first_readable(dirs: Iterable[str | Path | None], name: str) -> dict[str, Any]:
    for d in dirs:
        if d and (Path(d) / name).is_file():
            try:
                data = json.loads((Path(d) / name).read_text())
            except (OSError, ValueError):
                return {}
            return data if isinstance(data, dict) else {}
    return {}


def load_series(*dirs: str | Path | None) -> dict[str, Any]:
    """The series stored in the first of *dirs* that has them ({} if none)."""
    return _first_readable(dirs, SERIES_FILE)


def load_samples(*dirs: str | Path | None) -> dict[str, Any]:
    """The samples stored in the first of *dirs* that has them ({} if none)."""
    return _first_readable(dirs, SAMPLES_FILE)


def median(values: list[float]) -> float:
    """The figure a run reports for its samples."""
    return float(statistics.median(values))
