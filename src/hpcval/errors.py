"""Exceptions raised by hpcval.

Every error names the file and the field it is about, so that a person can fix
the input without reading a traceback.
"""

from __future__ import annotations


class HpcvalError(Exception):
    """Base class for all errors hpcval reports to a user."""


class ParseError(HpcvalError):
    """Benchmark output could not be parsed or reports a failure."""


class ReferenceError_(HpcvalError):
    """A references file is malformed or does not fit the checks."""

    def __init__(self, path: str, key: str, reason: str) -> None:
        self.path = str(path)
        self.key = key
        self.reason = reason
        where = f"{self.path}: {key}" if key else self.path
        super().__init__(f"{where}: {reason}")


# Public name; the trailing underscore avoids shadowing the builtin in this module.
ReferencesError = ReferenceError_


class SiteError(HpcvalError):
    """A site configuration is missing or malformed."""
