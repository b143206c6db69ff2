"""A site's references applied: the reference of each figure of a test case
(:func:`resolve`, the levels of a ``references.yaml`` entry walked with the
test's attributes), and new references captured from a stored run
(:func:`capture`, :func:`dump_references`).

Loading and validating the file is :mod:`hpcval.site.references`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from hpcval.core.errors import ReferencesError
from hpcval.core.figures import stored_direction, worse_side_band
from hpcval.site.references import (
    _XFAIL,
    CheckEntry,
    Reference,
    ReferencesFile,
    _keypath,
    parse_reference,
)


def _lookup_level(level: dict[Any, Any], attr: str, value: Any, path: str,
                  keys: list[Any]) -> tuple[Any, Any]:
    """Find ``value`` among the keys of one index level, ReFrame's way (exact
    match, then keys as anchored regexes for strings), with loud errors where
    ReFrame would silently drop the reference."""
    if value in level and type(value) is type(next(k for k in level if k == value)):
        return value, level[value]
    for key in level:
        if isinstance(key, str) and not isinstance(value, str) and key == str(value):
            raise ReferencesError(
                path, _keypath([*keys, repr(key)]),
                f"key {key!r} is a string but {attr} is {type(value).__name__} {value!r}: "
                "write it without quotes",
            )
        if isinstance(value, str) and not isinstance(key, str) and str(key) == value:
            raise ReferencesError(
                path, _keypath([*keys, key]),
                f"key {key!r} is a {type(key).__name__} but {attr} is the string {value!r}: "
                "quote it",
            )
    if isinstance(value, str):
        for key in level:
            if isinstance(key, str):
                try:
                    if re.fullmatch(key, value):
                        return key, level[key]
                except re.error as err:
                    raise ReferencesError(
                        path, _keypath([*keys, key]), f"invalid regular expression: {err}"
                    ) from None
    have = ", ".join(repr(k) for k in level)
    raise ReferencesError(
        path, _keypath(keys), f"no reference for {attr}={value!r} (keys here: {have})"
    )


def resolve(entry: CheckEntry, path: str | Path,
            attribute: Callable[[str], Any], system: str, partition: str) -> dict[str, Reference]:
    """The {variable: Reference} that apply to one test case.

    ``attribute(name)`` returns the value of an index attribute (``$environ``,
    ``num_tasks``, ...). Without an index, scopes are merged from ``'*'`` over
    ``'<system>'`` to ``'<system>:<partition>'``, as ReFrame does.
    """
    spath = str(path)
    if entry.index is None:
        merged: dict[str, Any] = {}
        for scope in ("*", system, f"{system}:{partition}"):
            merged.update(entry.data.get(scope, {}))
        unknown = [s for s in entry.data if s not in ("*", system, f"{system}:{partition}")
                   and not s.startswith(f"{system}:")]
        if not merged:
            raise ReferencesError(
                spath, entry.name, f"no scope applies to {system}:{partition} "
                f"(scopes: {', '.join(map(repr, entry.data)) or 'none'}{'; ' if unknown else ''}"
                f"{'unused: ' + ', '.join(map(repr, unknown)) if unknown else ''})"
            )
        return {v: parse_reference(r, spath, f"{entry.name}.{v}") for v, r in merged.items()}

    node: Any = entry.data
    keys: list[Any] = [entry.name]
    for attr in entry.index:
        try:
            value = attribute(attr)
        except AttributeError:
            raise ReferencesError(
                spath, f"{entry.name}.$index", f"the check has no attribute {attr!r}"
            ) from None
        key, node = _lookup_level(node, attr, value, spath, keys)
        keys.append(key)
    return {v: parse_reference(r, spath, _keypath([*keys, v])) for v, r in node.items()}


def _case_key(case: Any, attr: str) -> Any:
    """Value of an index attribute in a run report's test case."""
    raw = case.raw
    if attr == "$system":
        return case.system
    if attr == "$partition":
        return f"{case.system}:{case.partition}"
    if attr == "$environ":
        return case.environ
    if attr.startswith("$processor."):
        raise ReferencesError("", attr, "cannot capture references indexed by processor "
                              "attributes from a run report; write them by hand")
    if attr not in raw:
        raise ReferencesError("", attr, f"the run report has no attribute {attr!r} for "
                              f"{case.display_name} (is it loggable?)")
    return raw[attr]


def _captured(value: float, tolerance: float, old: Reference | None, unit: str,
              direction: str | None) -> list[Any]:
    """``[value, lower, upper, unit]``: bounded on the worse side of the
    figure's declared ``direction`` only (a faster run never fails), unless
    the old reference bounded a side; both sides where the direction is
    unknown (:func:`hpcval.core.figures.stored_direction`)."""
    lower, upper = worse_side_band(tolerance, direction)
    if old is not None:
        # Keep a side the site bounded, or left unbounded, on purpose.
        lower = None if old.lower is None else -tolerance
        upper = None if old.upper is None else tolerance
    return [float(f"{value:.6g}"), lower, upper, unit]


def capture(report: Any, tolerance: float, existing: ReferencesFile | None) -> dict[str, Any]:
    """References from a run's measured values: each figure becomes
    ``[value, -tolerance, +tolerance, unit]``. The index of an existing entry
    is kept; a new check is indexed by environment and its parameters. Entries
    of checks absent from the run are kept unchanged."""
    if not 0 < tolerance < 1:
        raise ReferencesError("", "--tolerance", f"must be a fraction between 0 and 1, got "
                              f"{tolerance}")
    out: dict[str, Any] = {}
    if existing is not None:
        for name, entry in existing.entries.items():
            body = dict(entry.data)
            if entry.index:
                body = {"$index": list(entry.index), **body}
            out[name] = body
    for case in report.cases:
        if not case.perf or case.result not in ("pass", "fail"):
            continue  # no figures, or sanity failed: nothing trustworthy to capture
        name = case.check
        old_entry = existing.entries.get(name) if existing else None
        params = [p.split("=", 1)[0].lstrip("%") for p in case.display_name.split()[1:]
                  if p.startswith("%")]
        index = list(old_entry.index) if old_entry and old_entry.index else \
            ["$environ", *params]
        body = out.setdefault(name, {})
        if old_entry is None or not old_entry.index:
            body.clear()
        body["$index"] = index
        node = body
        for attr in index:
            node = node.setdefault(_case_key(case, attr), {})
        old_refs: dict[str, Reference] = {}
        if old_entry is not None and old_entry.index:
            try:
                old_refs = resolve(old_entry, existing.path if existing else "",
                                   lambda a, c=case: _case_key(c, a), case.system,
                                   case.partition)
            except ReferencesError:
                old_refs = {}
        samples = case.samples()
        for p in case.perf:
            if p.value is None:
                continue
            if not math.isfinite(p.value):
                raise ReferencesError("", f"{name}.{p.variable}",
                                      f"measured {p.value}: not a number a reference can be "
                                      "taken from; fix the run first")
            stored = samples.get(p.variable)
            direction = stored_direction(stored.get("better") if isinstance(stored, dict)
                                         else None, p.unit)
            node[p.variable] = _captured(p.value, tolerance, old_refs.get(p.variable), p.unit,
                                         direction)
    return out


class _FlowList(list):
    """A reference tuple, dumped on one line."""


def _flow_representer(dumper: yaml.SafeDumper, data: _FlowList) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)


def dump_references(data: dict[str, Any], header: str = "") -> str:
    """YAML a person can review: reference tuples on one line, index first."""

    def flow(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: flow(v) for k, v in node.items()}
        if isinstance(node, list) and node and not isinstance(node[0], str):
            return _FlowList(node)
        if isinstance(node, list) and node and node[0] == _XFAIL:
            return _FlowList([node[0], node[1], _FlowList(node[2])])
        return _FlowList(node) if isinstance(node, list) else node

    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(_FlowList, _flow_representer)
    text = yaml.dump(flow(data), Dumper=Dumper, sort_keys=False, default_flow_style=False,
                     width=100)
    return header + text
