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
