"""Per-site reference values: loading and validation (resolving and capturing
them is :mod:`hpcval.site.refresolve`).

A site's references live in ``site-configs/<site>/references.yaml`` in
ReFrame's external-reference format::

    imb_pingpong_check:              # the check's class name
      $index: [$environ, cache]      # optional: levels keyed by test attributes
      '.*':                          # string keys are anchored regexes
        warm:
          lat_0B: [20.0, null, 0.0, us]    # [reference, lower, upper, unit]

Without ``$index`` the levels are ReFrame scopes (``'*'``, ``'<system>'``,
``'<system>:<partition>'``). Thresholds are fractions of the reference, as in
ReFrame; ``null`` means unbounded on that side.

ReFrame silently ignores several mistakes in such a file; hpcval turns each
into an error naming the file, the key and the reason:

* an entry for a check that does not exist (a typo or a renamed class);
* a check (for example a site's subclass, which has a new class name) with no
  entry of its own;
* a variable the check does not report, and a reported variable with no
  reference;
* a quoted ``'2'`` where the indexed attribute is the integer ``2`` (and the
  reverse), or an attribute value with no matching key;
* non-numeric values, malformed tuples, thresholds ReFrame would reject at the
  end of a run, units that differ from the check's.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval.core.errors import ReferencesError
from hpcval.core.figures import band_bounds
from hpcval.core.yamlio import load_yaml_bounded, read_bounded
from hpcval.site import checks

SPECIAL_INDEX_KEYS = ("$system", "$partition", "$environ")
_XFAIL = "$xfail"


@dataclass(frozen=True)
class Reference:
    """One judged figure: a reference value with relative bounds and a unit."""

    value: float
    lower: float | None
    upper: float | None
    unit: str | None
    xfail: str | None = None
    #: where it is in the references file (``check.warm.bw_1MiB``), for messages
    key: str = field(default="", compare=False)

    def bounds(self) -> tuple[float | None, float | None]:
        """Absolute (low, high) bounds, as ReFrame computes them."""
        return band_bounds(self.value, self.lower, self.upper)

    def as_reframe(self) -> Any:
        """The tuple (or xfail object) ReFrame's ``reference`` expects."""
        ref = (self.value, self.lower, self.upper, self.unit)
        if self.xfail is not None:
            from reframe.core.builtins import xfail

            return xfail(self.xfail, ref)
        return ref


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _keypath(parts: Iterable[Any]) -> str:
    return ".".join(str(p) for p in parts)


def parse_reference(value: Any, path: str, key: str) -> Reference:
    """Validate one ``[ref, lower, upper, unit]`` (or xfail) entry."""
    xfail_msg = None
    if isinstance(value, list) and value and value[0] == _XFAIL:
        if len(value) != 3 or not isinstance(value[1], str):
            raise ReferencesError(
                path, key, f"an expected failure is ['$xfail', 'reason', [ref, lower, upper, "
                f"unit]], got {value!r}"
            )
        xfail_msg, value = value[1], value[2]
    if not isinstance(value, list) or len(value) not in (3, 4):
        raise ReferencesError(
            path, key, f"a reference is [value, lower, upper, unit], got {value!r}"
        )
    ref, lower, upper = value[:3]
    unit = value[3] if len(value) == 4 else None
    if not _is_number(ref):
        raise ReferencesError(path, key, f"reference value must be a number, got {ref!r}")
    for name, thres in (("lower", lower), ("upper", upper)):
        if thres is not None and not _is_number(thres):
            raise ReferencesError(
                path, key, f"{name} threshold must be a number or null, got {thres!r}"
            )
    if ref != 0:
        # The rules ReFrame's assert_reference enforces, checked before a run.
        if lower is not None and not (-1 <= lower <= 0) and ref > 0:
            raise ReferencesError(
                path, key, f"lower threshold {lower} must be between -1 and 0 (a fraction of the "
                "reference below it)"
            )
        if upper is not None and upper < 0 and ref > 0:
            raise ReferencesError(
                path, key, f"upper threshold {upper} must be >= 0 (a fraction above the reference)"
            )
    elif lower is not None and upper is not None and lower > upper:
        raise ReferencesError(path, key, f"lower bound {lower} is above upper bound {upper}")
    if unit is not None and not isinstance(unit, str):
        raise ReferencesError(path, key, f"unit must be a string, got {unit!r}")
    try:
        # the very rule ReFrame applies when it judges the figure, at the end of a run
        from reframe.utility.sanity import reference_bounds

        reference_bounds(ref, lower, upper)
    except ValueError as err:
        raise ReferencesError(path, key, f"ReFrame would reject this reference at the end of "
                              f"the run: {err} (reference {ref})") from None
    return Reference(float(ref), lower, upper, unit, xfail_msg, key)


@dataclass
class CheckEntry:
    """The references of one check: an optional index and a nested mapping."""

    name: str
    index: tuple[str, ...] | None
    data: dict[Any, Any]


@dataclass
class ReferencesFile:
    """A validated references file."""

    path: Path
    entries: dict[str, CheckEntry]

    def entry(self, name: str, bases: Iterable[str] = ()) -> CheckEntry:
        """The entry of check ``name``; a specific error if there is none."""
        if name in self.entries:
            return self.entries[name]
        hint = ""
        for base in bases:
            if base in self.entries:
                hint = (
                    f"; it derives from {base!r}, which has an entry: copy that entry under "
                    f"{name!r}, or set `reference_entry = {base!r}` in the check"
                )
                break
        else:
            close = difflib.get_close_matches(name, self.entries, n=1)
            if close:
                hint = f"; did you mean {close[0]!r}?"
        raise ReferencesError(
            self.path, name, f"no references for check {name!r}{hint} (every hpcval check "
            "needs an entry in its site's references file)"
        )


def _validate_levels(node: Any, depth: int, keys: list[Any], path: str,
                     index: tuple[str, ...] = ()) -> None:
    """Walk ``depth`` index levels down to a {variable: reference} mapping."""
    if depth == 0:
        if not isinstance(node, dict) or not node:
            levels = (f" (the $index {list(index)} puts {len(index)} level(s) above the "
                      "variables: is a level missing?)" if index else "")
            raise ReferencesError(
                path, _keypath(keys), f"expected a mapping of variable: [value, lower, upper, "
                f"unit], got {node!r}{levels}"
            )
        for var, ref in node.items():
            if not isinstance(var, str):
                raise ReferencesError(
                    path, _keypath([*keys, var]), "variable names must be strings"
                )
            parse_reference(ref, path, _keypath([*keys, var]))
        return
    if not isinstance(node, dict) or not node:
        raise ReferencesError(
            path, _keypath(keys), f"expected a mapping for the next index level, got {node!r}"
        )
    for key, sub in node.items():
        _validate_levels(sub, depth - 1, [*keys, key], path, index)


_SCOPE = re.compile(r"\*|[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)?\Z")


def _validate_keys(node: Any, depth: int, keys: list[Any], path: str) -> None:
    """Index-level string keys are matched as anchored regexes at run time:
    each must compile."""
    if depth == 0 or not isinstance(node, dict):
        return
    for key, sub in node.items():
        if isinstance(key, str):
            try:
                re.compile(key)
            except re.error as err:
                raise ReferencesError(path, _keypath([*keys, key]),
                                      f"invalid regular expression: {err} (index keys that "
                                      "are strings are matched as anchored regexes)") from None
        _validate_keys(sub, depth - 1, [*keys, key], path)


def check_attributes_in(*directories: str | Path) -> dict[str, tuple[list[str], set[str]]]:
    """:func:`hpcval.site.checks.class_attributes` (bases and attributes of every
    class below ``directories``, read with :mod:`ast`)."""
    return checks.class_attributes(*directories)


def _reframe_attributes() -> set[str]:
    try:
        import reframe as rfm

        return set(rfm.RegressionTest._rfm_var_space) | {
            a for a in dir(rfm.RegressionTest) if not a.startswith("_")}
    except Exception:  # noqa: BLE001 - ReFrame missing: nothing to add
        return set()


def attributes_of(name: str, classes: Mapping[str, tuple[list[str], set[str]]]) -> set[str]:
    """Attributes check ``name`` has: its own, its bases', ReFrame's."""
    found: set[str] = set()
    stack, seen = [name], set()
    while stack:
        cls = stack.pop()
        if cls in seen or cls not in classes:
            continue
        seen.add(cls)
        bases, names = classes[cls]
        found |= names
        stack.extend(bases)
    return found | _reframe_attributes()


def load_references(path: str | Path, known_checks: Iterable[str] | None = None,
                    check_classes: Mapping[str, tuple[list[str], set[str]]] | None = None,
                    ) -> ReferencesFile:
    """Read and validate a references file.

    ``known_checks``, when given, is the set of check class names that exist;
    an entry for any other name is an error (a typo, or a renamed check).
    ``check_classes`` (:func:`check_attributes_in`), when given, lets every
    ``$index`` attribute be checked against the attributes its check has.
    """
    path = Path(path)
    spath = str(path)
    try:
        data = read_bounded(path, ReferencesError)
    except FileNotFoundError:
        raise ReferencesError(spath, "", "references file not found") from None
    except OSError as err:
        raise ReferencesError(spath, "", f"cannot read: {err.strerror}") from None
    return load_references_text(data, path, known_checks, check_classes)


def load_references_text(text: str | bytes, path: str | Path,
                         known_checks: Iterable[str] | None = None,
                         check_classes: Mapping[str, tuple[list[str], set[str]]] | None = None,
                         ) -> ReferencesFile:
    """Validate references given as YAML text or bytes (``path`` names them
    in errors); loading is bounded (:func:`load_yaml_bounded`)."""
    path = Path(path)
    spath = str(path)
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    raw = load_yaml_bounded(data, spath, ReferencesError)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ReferencesError(spath, "", "top level must map check names to references")

    known = set(known_checks) if known_checks is not None else None
    entries: dict[str, CheckEntry] = {}
    for name, body in raw.items():
        if not isinstance(name, str):
            raise ReferencesError(spath, str(name), "check names must be strings")
        if known is not None and name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ReferencesError(spath, name, f"no check named {name!r}{hint}")
        if not isinstance(body, dict):
            raise ReferencesError(spath, name, f"expected a mapping, got {body!r}")
        body = dict(body)
        index = body.pop("$index", None)
        if index is not None:
            if (not isinstance(index, list) or not index
                    or not all(isinstance(i, str) for i in index)):
                raise ReferencesError(
                    spath, f"{name}.$index", f"must be a list of attribute names, got {index!r}"
                )
            index = tuple(index)
            _validate_levels(body, len(index), [name], spath, index)
            _validate_keys(body, len(index), [name], spath)
            if check_classes is not None and name in check_classes:
                have = attributes_of(name, check_classes)
                for attr in index:
                    if attr in SPECIAL_INDEX_KEYS or attr.startswith("$processor."):
                        continue
                    if attr.startswith("$") or attr not in have:
                        close = difflib.get_close_matches(attr, have, n=1)
                        hint = f"; did you mean {close[0]!r}?" if close else ""
                        raise ReferencesError(
                            spath, f"{name}.$index",
                            f"check {name!r} has no attribute {attr!r}{hint} (index by "
                            "$system, $partition, $environ, $processor.<x> or an attribute "
                            "of the check)")
        else:
            # ReFrame scopes: '*', 'system' or 'system:partition'
            _validate_levels(body, 1, [name], spath)
            for scope in body:
                if not isinstance(scope, str) or not _SCOPE.match(scope):
                    raise ReferencesError(
                        spath, _keypath([name, scope]),
                        f"{scope!r} is not a ReFrame scope ('*', '<system>' or "
                        "'<system>:<partition>'; scopes are not regexes): use $index for "
                        "patterns")
        entries[name] = CheckEntry(name, index, body)
    return ReferencesFile(path, entries)


def check_references(path: str | Path, checks_dir: str | Path) -> ReferencesFile:
    """Every validation a run would make of a references file, without running
    anything: structure, numbers, thresholds as ReFrame applies them, check
    names, scopes, index keys as regexes, ``$index`` attributes of each check,
    variables and units of the checks that declare their figures in the class.
    Variables, units and ``$index`` values are checked again per test case
    before each benchmark starts (:class:`hpcval.rfm.HpcvalTest`). The other
    site files: :meth:`hpcval.site.Site.check_files`."""
    classes = check_attributes_in(checks_dir, Path(__file__).resolve().parents[1] / "rfm")
    ref_file = load_references(path, known_checks=check_names_in(checks_dir),
                               check_classes=classes)
    figures = figures_in(checks_dir)
    for name, entry in ref_file.entries.items():
        reported = figures.get(name)
        if reported is not None:
            check_entry_variables(entry, reported, ref_file.path)
    return ref_file


def figures_in(directory: str | Path) -> dict[str, dict[str, str | None]]:
    """``{check class: {variable: unit}}`` for the checks below ``directory``
    whose figures are declared in the class (``figures = (...)``); checks
    whose figures depend on the test case (a property) or whose file does not
    import are left to the run."""
    found: dict[str, dict[str, str | None]] = {}
    for cls_name, cls in checks.import_classes(directory).items():
        figures = getattr(cls, "figures", None)
        if not isinstance(figures, tuple) or not figures:
            continue
        if all(hasattr(f, "name") and hasattr(f, "unit") for f in figures):
            found[cls_name] = {f.name: f.unit for f in figures}
    return found


def check_entry_variables(entry: CheckEntry, reported: Mapping[str, str | None],
                          path: str | Path) -> None:
    """Each set of references of ``entry`` names the variables the check
    reports, with their units (:func:`check_variables`): every ``$index``
    leaf; without an index every scope, and the ``'*'`` scope in full when it
    is the only one."""
    spath = str(path)

    def leaves(node: Any, depth: int, keys: list[Any]) -> Iterator[tuple[Any, list[Any]]]:
        if depth == 0:
            yield node, keys
            return
        for key, sub in node.items():
            yield from leaves(sub, depth - 1, [*keys, key])

    if entry.index is not None:
        for node, keys in leaves(entry.data, len(entry.index), [entry.name]):
            refs = {v: parse_reference(r, spath, _keypath([*keys, v])) for v, r in node.items()}
            check_variables(refs, reported, spath, _keypath(keys))
        return
    for scope, node in entry.data.items():
        keys = [entry.name, scope]
        refs = {v: parse_reference(r, spath, _keypath([*keys, v])) for v, r in node.items()}
        if len(entry.data) > 1:  # a scope may give some variables, another the rest
            refs = {**{v: refs.get(v) or Reference(0.0, None, None, None)
                       for v in reported}, **refs}
        check_variables(refs, reported, spath, _keypath(keys))


def check_names_in(directory: str | Path) -> set[str]:
    """Names of the classes defined in the check files below ``directory``
    (:func:`hpcval.site.checks.class_names`: read with :mod:`ast`, nothing imported)."""
    return checks.class_names(directory)


def check_variables(refs: Mapping[str, Reference], reported: Mapping[str, str | None],
                    path: str | Path, where: str) -> None:
    """Every reported variable has a reference with its unit, and every
    reference names a reported variable."""
    missing = sorted(set(reported) - set(refs))
    if missing:
        raise ReferencesError(
            str(path), where, f"missing reference for variable(s) {', '.join(missing)}: every "
            "figure a check reports must be judged"
        )
    unknown = sorted(set(refs) - set(reported))
    if unknown:
        hints = []
        for u in unknown:
            close = difflib.get_close_matches(u, reported, n=1)
            hints.append(f"{u} (did you mean {close[0]}?)" if close else u)
        raise ReferencesError(
            str(path), where, f"unknown variable(s) {', '.join(hints)}; the check reports "
            f"{', '.join(sorted(reported))}"
        )
    for var, unit in reported.items():
        ref_unit = refs[var].unit
        if ref_unit is not None and unit is not None and ref_unit != unit:
            raise ReferencesError(
                str(path), refs[var].key or f"{where}.{var}",
                f"unit {ref_unit!r} differs from the check's {unit!r}"
            )
