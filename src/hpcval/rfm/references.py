"""References of a check: read from its site's file, never written in the check.

Plain functions, each called by one hook of :class:`hpcval.rfm.HpcvalTest`:
the site's references file, loaded and validated once per run
(:func:`site_references`, by :mod:`hpcval.site.references`); the check's entry,
resolved for its system, partition, environment and parameters
(:func:`resolve`); a missing reference, or one whose unit differs from the
figure's, fails the check before the benchmark runs (:func:`apply`) and again
when the figures are judged (:func:`check_reported`). A ``hpcval validate
--record`` run (:func:`recording`) measures without references.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from reframe.core.exceptions import ReframeError

from hpcval.core.errors import HpcvalError, SiteError
from hpcval.core.paths import checks_dir
from hpcval.rfm import placement
from hpcval.site import Site, checks, refresolve
from hpcval.site import references as refs

#: Set by ``hpcval validate --record`` (see :mod:`hpcval.run.runner`).
RECORD_ENV = "HPCVAL_RECORD"

# Validated references files, keyed by (path, mtime), so that each file is read
# once per session however many checks use it.
_CACHE: dict[tuple[str, float], refs.ReferencesFile] = {}


def recording() -> bool:
    """True in a ``hpcval validate --record`` run: measure, do not judge."""
    return os.environ.get(RECORD_ENV) == "1"


class ReferencesFailure(ReframeError):
    """A check's references are missing or wrong (shown as the failure reason)."""


def _known_check_names(test: Any, base: type) -> set[str]:
    names = {cls.__name__ for cls in checks.subclasses(base)}
    dirs = {Path(test.prefix)}
    try:
        dirs.add(checks_dir())
    except SiteError:
        pass
    for d in dirs:
        names |= refs.check_names_in(d)
    return names


def site_references(test: Any, base: type) -> refs.ReferencesFile:
    """The validated references file of the site the test runs on (the
    names of the checks it may hold: the loaded subclasses of *base* and the
    classes of the check files)."""
    site = Site.of_test(test)
    path = site.references
    try:
        mtime = path.stat().st_mtime
    except OSError:
        raise refs.ReferencesError(str(path), "", "references file not found") from None
    key = (str(path), mtime)
    if key not in _CACHE:
        _CACHE[key] = site.load_references(known_checks=_known_check_names(test, base))
    return _CACHE[key]


def attribute(test: Any, name: str) -> Any:
    """The value of an index key of a references entry for *test*: a variable
    or parameter, or ``$system``, ``$partition``, ``$environ``,
    ``$processor.<attr>``."""
    if name == "$system":
        return test.current_system.name
    if name == "$partition":
        return test.current_partition.fullname
    if name == "$environ":
        return test.current_environ.name
    if name.startswith("$processor."):
        attr = name.split(".", 1)[1]
        value = getattr(test.current_partition.processor, attr)
        # what ReFrame left unknown, hpcval's detected topology may know
        return value if value is not None else \
            getattr(placement.topology_of(test.current_partition), attr, None)
    return getattr(test, name)


def require_reference(test: Any) -> None:
    """Every figure needs a reference, except in a recording run (figures
    are measured and stored, not judged)."""
    test.require_reference = not recording()


def resolve(test: Any, base: type) -> dict[str, refs.Reference]:
    """The references of *test*'s entry (``reference_entry``, else its class
    name, else a parent's) for where and how it runs."""
    name = test.reference_entry or type(test).__name__
    bases = [c.__name__ for c in type(test).__mro__[1:]]
    try:
        ref_file = site_references(test, base)
        entry = ref_file.entry(name, bases)
        resolved = refresolve.resolve(
            entry, ref_file.path, lambda a: attribute(test, a),
            test.current_system.name, test.current_partition.name,
        )
    except HpcvalError as err:
        raise ReferencesFailure(str(err)) from None
    test._hpcval_refs_path = str(ref_file.path)
    test._hpcval_entry_name = name
    return resolved


def _check_variables(test: Any, reported: dict[str, str | None]) -> None:
    try:
        refs.check_variables(test._hpcval_refs, reported, test._hpcval_refs_path,
                             test._hpcval_entry_name)
    except HpcvalError as err:
        raise ReferencesFailure(str(err)) from None


def apply(test: Any, base: type) -> None:
    """*test*'s references as ReFrame's ``reference``. After setup, so a
    check that skips itself (a tool or input missing) needs no references;
    before the run, so a wrong references file, or a variable or unit that
    does not match, fails before any benchmark time is spent."""
    if not test.perf_variables or recording():
        # a check judged by its sanity alone (e.g. an audit) has no figures;
        # a recording run measures without references
        test._hpcval_refs = {}
        return
    test._hpcval_refs = resolve(test, base)
    test.reference = {"*": {v: r.as_reframe() for v, r in test._hpcval_refs.items()}}
    _check_variables(test, {name: fn.unit for name, fn in test.perf_variables.items()})


def check_reported(test: Any) -> None:
    """The variables the check reports match its references, by name and unit."""
    if test.is_dry_run():
        return
    reported = {name: fn.unit for name, fn in test.perf_variables.items()}
    if (not reported and not test._hpcval_refs) or recording():
        return
    _check_variables(test, reported)
