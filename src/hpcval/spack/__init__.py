"""Spack for hpcval, one room per concern (docs/layout.md):

- :mod:`hpcval.spack.builds`: finding Spack and reading what it built, what site configs
  need when ReFrame loads them (import-light);
- :mod:`hpcval.spack.venvmpi`: the project venv's Intel MPI as Spack's external
  (``hpcval spack externals``);
- :mod:`hpcval.spack.environments`: the environments as files, manifests, declared
  target and locks (``hpcval spack lock``);
- :mod:`hpcval.spack.proxies`: the versions of hpcval's own proxies
  (``hpcval spack proxy-version``);
- :mod:`hpcval.spack.preinstall`: what an install assumes (``hpcval spack doctor``,
  ``hpcval spack install``);
- :mod:`hpcval.spack.streamsize`: STREAM's array size from the node's cache;
- :mod:`hpcval.spack.mirror`: the source mirror from repository clones
  (``hpcval spack mirror``);
- :mod:`hpcval.spack.lockdiff`: two locks compared spec by spec, the Spack header apart
  (``hpcval spack lock --diff``).

Every public name of the rooms is read as ``hpcval.spack.<name>`` too
(``from hpcval import spack; spack.find_spack()``). A room is imported when one of its
names is first asked for, so a site config that only needs :mod:`~hpcval.spack.builds`
imports nothing else.
"""

from __future__ import annotations

import importlib
from typing import Any

#: The rooms, in the order a name is looked for (what site configs need first).
ROOMS = ("builds", "venvmpi", "environments", "proxies", "preinstall", "streamsize",
         "mirror", "lockdiff")


def __getattr__(name: str) -> Any:
    if not name.startswith("_"):
        for room in ROOMS:
            module = importlib.import_module(f"{__name__}.{room}")
            if hasattr(module, name):
                return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    names = set(globals())
    for room in ROOMS:
        module = importlib.import_module(f"{__name__}.{room}")
        names.update(n for n in vars(module) if not n.startswith("_"))
    return sorted(names)
