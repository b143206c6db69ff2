"""Exceptions raised by hpcval, and the exit codes they map to.

Every error names the file and the key it is about and says what to do, so
that a person can fix the input without reading a traceback. The command
line (:func:`hpcval.cli.main`) prints one line per error and exits with the
class's ``exit_code``:

===  =====================================================================
0    every check passed (and no figure regressed)
1    a check failed or a figure regressed (:class:`CheckFailed`)
2    wrong input, wherever it is found: site name, site config,
     references, settings, command-line arguments (:class:`InputError`)
3    an environment fault: disk full, read-only or unusable results
     store, a lock held by someone else, a tool missing
     (:class:`EnvironmentFault`)
129  stopped by SIGHUP (a closed terminal)
130  stopped by SIGINT (Ctrl-C)
143  stopped by SIGTERM (``timeout``, ``kill``, a systemd stop): a run
     stopped by a signal exits 128 + the signal's number, after every
     process of the run is gone; what finished is stored as ``interrupted``
===  =====================================================================
"""

from __future__ import annotations

#: Exit codes of every hpcval command (documented in README.md).
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_INTERRUPTED = 130


class HpcvalError(Exception):
    """Base class for all errors hpcval reports to a user (exit 2 unless a
    subclass says otherwise)."""

    exit_code = EXIT_INPUT


class InputError(HpcvalError):
    """Wrong input: a file, a key or an argument a person must fix."""

    exit_code = EXIT_INPUT


class ParseError(HpcvalError):
    """Benchmark output could not be parsed or reports a failure."""


class ReferenceError_(InputError):
    """A references file is malformed or does not fit the checks."""

    def __init__(self, path: str, key: str, reason: str) -> None:
        self.path = str(path)
        self.key = key
        self.reason = reason
        where = f"{self.path}: {key}" if key else self.path
        super().__init__(f"{where}: {reason}")


# Public name; the trailing underscore avoids shadowing the builtin in this module.
ReferencesError = ReferenceError_


class SiteError(InputError):
    """A site configuration is missing or malformed."""


class CheckFailed(HpcvalError):
    """A check failed or a figure regressed."""

    exit_code = EXIT_FAILED


class EnvironmentFault(HpcvalError):
    """The machine, not the input, is at fault: disk full, read-only or
    corrupt results store, a lock held by another run, a tool missing."""

    exit_code = EXIT_ENVIRONMENT


class StoreError(EnvironmentFault):
    """The results store is unusable (corrupt, read-only, full)."""


class LockTimeout(EnvironmentFault):
    """A lock is held by another process for longer than we wait."""


def input_failure(fail_reason: str | None) -> bool:
    """True where a test case failed for wrong input (its references or its
    site config), not for what it measured: ReFrame writes the exception's
    class name first (``references failure: ...``, ``config failure: ...``)."""
    return bool(fail_reason) and str(fail_reason).startswith(
        ("references failure:", "config failure:"))
