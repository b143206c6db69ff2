"""Where the project's directories and the results store are."""

from __future__ import annotations

import os
from pathlib import Path

from hpcval.core.errors import SiteError

#: The checkout's directories of check files, site configs and Spack environments.
CHECKS_DIR = "reframe-checks"
SITE_CONFIGS_DIR = "site-configs"
ENVIRONMENTS_DIR = "environments"

_MARKERS = (SITE_CONFIGS_DIR, CHECKS_DIR)


def _looks_like_root(path: Path) -> bool:
    return all((path / m).is_dir() for m in _MARKERS)


def project_root() -> Path:
    """The hpcval checkout: ``$HPCVAL_ROOT``, else the nearest parent of the
    working directory or of this package that holds ``site-configs/`` and
    ``reframe-checks/``."""
    env = os.environ.get("HPCVAL_ROOT")
    if env:
        root = Path(env).resolve()
        if not _looks_like_root(root):
            raise SiteError(f"HPCVAL_ROOT={env}: no site-configs/ and reframe-checks/ there")
        return root
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for candidate in (start, *start.parents):
            if _looks_like_root(candidate):
                return candidate
    raise SiteError(
        "cannot find the hpcval checkout (a directory with site-configs/ and "
        "reframe-checks/); run from inside it or set HPCVAL_ROOT"
    )


def checks_dir(root: Path | None = None) -> Path:
    """``reframe-checks/`` of the checkout ``root`` (default: :func:`project_root`);
    with a site at hand, ask it: :attr:`hpcval.site.Site.checks_dir`."""
    return (root or project_root()) / CHECKS_DIR


#: Set by ``hpcval validate`` in ReFrame's environment: the ``TMPDIR`` to give
#: back (empty: none was set) once the site config is read. ReFrame logs its
#: start (before it reads the site config, which names its log) to a
#: ``rfm-*.log`` it makes in the temp directory and never removes; pointed at
#: the run's log directory, that file is in the results store from its first
#: byte, and a run killed (SIGKILL) or cut short by a full disk leaves nothing
#: in the system's temp directory.
TMPDIR_ENV = "HPCVAL_TMPDIR"


def start_log_environment(logs: Path) -> dict[str, str]:
    """What ``hpcval validate`` adds to ReFrame's environment so that ReFrame's
    start log is made in *logs* (:data:`TMPDIR_ENV`); nothing where *logs*
    cannot be made."""
    try:
        logs.mkdir(parents=True, exist_ok=True)
    except OSError:
        return {}
    return {TMPDIR_ENV: os.environ.get("TMPDIR", ""), "TMPDIR": str(logs)}


def restore_tmpdir() -> None:
    """In ReFrame's process, as the site config is read: ``TMPDIR`` as it was
    before ``hpcval validate`` pointed it at the run's logs (see
    :data:`TMPDIR_ENV`), so that the jobs, their MPI and the benchmarks see
    the host's own temp directory. Nothing outside such a run."""
    if TMPDIR_ENV not in os.environ:
        return
    import tempfile

    given = os.environ.pop(TMPDIR_ENV)
    if given:
        os.environ["TMPDIR"] = given
    else:
        os.environ.pop("TMPDIR", None)
    tempfile.tempdir = None  # chosen again from TMPDIR at its next use
