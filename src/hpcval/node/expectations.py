"""A site's ``host-expectations.yaml``: how the file states what a node's
settings should be, how it is read and checked, and how a value found on a node
is matched against its expectation.

Both audits read it: the host audit (:mod:`hpcval.node.audit`) owns the plain
setting names, the GPU audit (:mod:`hpcval.node.gpu_audit`) the ``gpu.*`` ones. This
module knows neither list: each audit passes the names it owns.

An expectation is an exact value (strings compare as text), ``any``
(informational: shown, never judged), or a mapping of ``min``/``max`` (numbers)
or ``one_of`` (a list).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from hpcval.core.errors import SiteError
from hpcval.core.yamlio import load_yaml_bounded


def describe(expect: Any) -> str:
    """An expectation as a person reads it."""
    if isinstance(expect, dict):
        return ", ".join(f"{k} {v}" for k, v in expect.items())
    return repr(str(expect)) if expect != "any" else "any"


def _number(value: str) -> float | None:
    try:
        return float(value.split()[0]) if value.split()[0] != "unlimited" else float("inf")
    except (ValueError, IndexError):
        return None


def matches(found: str, expect: Any) -> bool:
    """Whether the value read on a node meets its expectation."""
    if isinstance(expect, dict):
        if "one_of" in expect:
            return found in [str(v) for v in expect["one_of"]]
        value = _number(found)
        if value is None:
            return False
        return (value >= float(expect.get("min", "-inf"))
                and value <= float(expect.get("max", "inf")))
    return found == str(expect)


def load(path: str | Path, known: Mapping[str, Collection[str]],
         only: str | None = None) -> dict[str, Any]:
    """Read and check a host expectations file.

    ``known`` maps a label to the setting names it owns (the first label is
    printed as "known"); a name outside all of them is an error. With ``only``
    (a name prefix), names without it are left to the audit that owns them.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SiteError(f"{path}: host expectations file not found") from None
    except OSError as err:
        raise SiteError(f"{path}: cannot read host expectations: {err.strerror}") from None

    def error(file: str, where: str, reason: str) -> SiteError:
        return SiteError(f"{file}: {where + ': ' if where else ''}{reason}")

    data = load_yaml_bounded(raw, str(path), error) or {}
    if not isinstance(data, dict):
        raise SiteError(f"{path}: must map setting names to expected values")
    names = {name for owned in known.values() for name in owned}
    for name, expect in data.items():
        if only is not None and not str(name).startswith(only):
            continue
        if name not in names:
            lists = "; ".join(f"{'known' if i == 0 else label}: {', '.join(owned)}"
                              for i, (label, owned) in enumerate(known.items()))
            raise SiteError(f"{path}: {name}: unknown setting ({lists})")
        if isinstance(expect, dict):
            unknown = set(expect) - {"min", "max", "one_of"}
            if unknown or not expect:
                raise SiteError(f"{path}: {name}: expected 'min', 'max' or 'one_of', got "
                                f"{sorted(unknown) or 'nothing'}")
            for key in ("min", "max"):
                if key in expect and not isinstance(expect[key], (int, float)):
                    raise SiteError(f"{path}: {name}.{key}: must be a number, got "
                                    f"{expect[key]!r}")
            if "one_of" in expect and not isinstance(expect["one_of"], list):
                raise SiteError(f"{path}: {name}.one_of: must be a list")
        elif isinstance(expect, (list, type(None))):
            raise SiteError(f"{path}: {name}: expected a value, 'any' or a mapping, got "
                            f"{expect!r}")
    return data
