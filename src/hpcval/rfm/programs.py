"""Program lookup: where the benchmark program a check runs is, and which
build it is.

Plain functions, each called by one hook or method of
:class:`hpcval.rfm.HpcvalTest`: the Spack build the programming environment
offers (:func:`spack_entry`, :func:`spack_prefix`) and its concrete spec
(:func:`record_stack`), where a program is (:func:`locate_program`, and
:func:`find_program`, which skips the test with the fix where it is absent),
and whether it was linked against the environment's MPI
(:func:`skip_other_mpi`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from hpcval.node.mpi_abi import mpi_mismatch
from hpcval.site import PROVENANCE_EXTRA


def environ_path_dirs(env_vars: object) -> list[str]:
    """Directories a programming environment puts on ``PATH`` (its
    ``env_vars``), without the inherited ``$PATH``."""
    items = env_vars.items() if hasattr(env_vars, "items") else env_vars or []
    dirs: list[str] = []
    for item in items:  # type: ignore[attr-defined]
        name, value = (item[0], item[1]) if isinstance(item, (list, tuple)) else (item, "")
        if name == "PATH":
            dirs += [d for d in str(value).split(":") if d and "$" not in d]
    return dirs


def _executable_in(root: Path, name: str) -> str | None:
    for candidate in (root / name, root / "bin" / name):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    for found in sorted(root.rglob(name)) if root.is_dir() else []:
        if found.is_file() and os.access(found, os.X_OK):
            return str(found)
    return None


def locate_program(name: str, *, spack_prefix: str | None = None,
                   dirs_var: str | None = None, environ: str | None = None,
                   environ_dirs: list[str] | None = None) -> tuple[str | None, str]:
    """Path of program *name* and where it was looked for, in this order: the
    Spack build the programming environment offers (*spack_prefix*, searched
    with its subdirectories, e.g. OMB's ``libexec/``); the directories of
    ``$<dirs_var>`` (colon-separated, each searched with its subdirectories)
    when the environment is the one ``$<dirs_var minus _DIR>_ENVIRON`` names
    (default ``impi``), so a build for one MPI never runs under another; the
    ``PATH`` the environment sets (*environ_dirs*); then ``PATH``."""
    if spack_prefix:
        found = _executable_in(Path(spack_prefix), name)
        if found:
            return found, f"the environment's Spack build ({spack_prefix})"
    where = "PATH"
    if dirs_var:
        environ_var = dirs_var.removesuffix("_DIR") + "_ENVIRON"
        dirs = [d for d in os.environ.get(dirs_var, "").split(":") if d]
        if dirs and (environ is None or os.environ.get(environ_var, "impi") == environ):
            for d in dirs:
                found = _executable_in(Path(d), name)
                if found:
                    return found, f"${dirs_var}"
        where = f"${dirs_var} ({os.environ.get(dirs_var, 'unset')}) or PATH"
    for d in environ_dirs or []:
        candidate = Path(d) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate), "the environment's PATH"
    return shutil.which(name), where


def spack_entry(environ: Any, package: str) -> dict[str, str] | None:
    """Prefix and spec of the Spack-built *package* the environment offers
    (its ``extras.spack``, see :func:`hpcval.rfm.site.spack_environments`)."""
    return environ.extras.get("spack", {}).get(package)


def spack_prefix(test: Any, package: str | None = None) -> str | None:
    """Install prefix of the Spack-built *package* (default: the test's
    ``spack_package``) its programming environment offers, or ``None``."""
    entry = spack_entry(test.current_environ, package or test.spack_package)
    return str(entry["prefix"]) if entry else None


def record_stack(test: Any) -> None:
    """The MPI stack the test runs with (``mpi_stack``), what the site config
    declares about the machine (``site_provenance``), and the concrete spec of
    its Spack-built program, or of the environment (``software_spec``)."""
    test.mpi_stack = str(test.current_environ.extras.get("mpi_stack", "unknown"))
    test.site_provenance = dict(test.current_partition.extras.get(PROVENANCE_EXTRA) or {})
    if test.spack_package:
        entry = spack_entry(test.current_environ, test.spack_package)
        test.software_spec = str(entry["spec"]) if entry else ""
    else:
        test.software_spec = str(test.current_environ.extras.get("spec", ""))


def find_program(test: Any, name: str, dirs_var: str | None = None,
                 package: str | None = None, mpi: bool = True) -> str:
    """Path of program *name* for the test's programming environment
    (:func:`locate_program`: its Spack build of *package*, default
    ``spack_package``, first); skips the test with a reason where absent.
    An MPI program (*mpi*) takes ``$<dirs_var>`` only in the environment
    it was built for; a program without MPI (*mpi* false, e.g. STREAM)
    runs from ``$<dirs_var>`` in any environment."""
    env = test.current_environ
    path, where = locate_program(name, spack_prefix=spack_prefix(test, package),
                                 dirs_var=dirs_var, environ=env.name if mpi else None,
                                 environ_dirs=environ_path_dirs(env.env_vars))
    hint = f", or set {dirs_var} to its directory" if dirs_var else ""
    test.skip_if(path is None,
                 f"{name} not found in {where}: install it (e.g. spack install "
                 f"{package or test.spack_package or name} in the site's Spack "
                 f"environment) and put it on PATH{hint}")
    return str(path)


def skip_other_mpi(test: Any, program: str) -> None:
    """Skip where *program* was linked against another MPI than the
    programming environment's (:func:`hpcval.node.mpi_abi.mpi_mismatch`), rather
    than launch it and fail at its first MPI call."""
    mismatch = mpi_mismatch(program, test.current_environ.features)
    test.skip_if(mismatch is not None,
                 f"{mismatch} (environment {test.current_environ.name})")
