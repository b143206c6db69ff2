"""Every value of a site config a run sizes or launches with, checked before
anything runs (``hpcval validate``, before the site lock and the first
benchmark).

A value that is wrong is found here, with exit 2 (wrong input) and one line
naming the file and the key, instead of inside the run (where it failed
checks one by one, exit 1) or not at all (a ``num_cpus`` of 1000000 put
``mpirun -np 1000000`` in the job scripts; a cache of -1 B sized the triad
to nothing and it passed). A tool a value names that is not there (the
environment's ``extras.mpirun``) is an environment fault, exit 3, naming the
key too (README: exit codes).

What is checked:

- each partition's ``processor``: ``num_cpus``, ``num_cores``,
  ``num_sockets``, ``num_cpus_per_core``, ``num_cpus_per_socket`` whole
  numbers above 0 and at most :data:`MAX_CPUS`; sockets and cores no more
  than CPUs; for a partition whose jobs run on this host (``local``
  scheduler), no more CPUs than this host has; every ``topology.caches``
  entry with a ``size`` above 0 (and ``linesize``, ``num_cpus`` above 0
  where given);
- each partition's ``extras``: ``budget`` (one of
  :data:`hpcval.node.sizing.BUDGETS`), ``mem_per_node`` (a size of at least
  :data:`MIN_MEMORY`, at most :data:`MAX_MEMORY`), the ceilings of
  :data:`CEILINGS` (positive finite numbers), ``gpu_memory_bytes`` and
  ``gpu_l2_bytes`` (bytes above 0), ``shared_fs_dir`` (an existing directory,
  for a local partition);
- each environment's ``extras.mpirun`` used by a local partition: an
  executable file (exit 3 when it is not there);
- the budget from every other source: ``$HPCVAL_BUDGET`` and ``-S budget=``
  (or ``-S <check>.budget=``) among the ReFrame options.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hpcval.core.errors import EnvironmentFault, SiteError
from hpcval.node import sizing
from hpcval.site import Site

#: More CPUs than any node has (the largest shared-memory nodes have a few thousand).
MAX_CPUS = 65536
#: Node memory below this cannot hold a benchmark and its MPI runtime.
MIN_MEMORY = 64 << 20
#: More memory than any node has (64 TiB).
MAX_MEMORY = 64 << 40

#: Partition extras that are positive numbers, with what they are.
CEILINGS = {
    "max_bandwidth_mbs": "a bandwidth ceiling (MB/s)",
    "memory_bw_mbs": "a peak memory bandwidth (MB/s)",
    "io_bw_mbs": "a device or link ceiling (MB/s)",
    "link_bw_mbs": "a link bandwidth (MB/s)",
}

_COUNTS = ("num_cpus", "num_cores", "num_sockets", "num_cpus_per_core", "num_cpus_per_socket")


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def host_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or os.cpu_count() or 1
    except OSError:
        return os.cpu_count() or 1


def check_processor(where: str, info: Any, local: bool, cpus_here: int) -> None:
    """One partition's ``processor`` (``where``: the file and the partition)."""
    if info in (None, {}):
        return
    if not isinstance(info, dict):
        raise SiteError(f"{where}.processor: {info!r} is not a processor description")
    for key in _COUNTS:
        value = info.get(key)
        if value is None:
            continue
        if not _whole(value) or not 0 < value <= MAX_CPUS:
            raise SiteError(f"{where}.processor.{key}: {value!r} is not a count: give a whole "
                            f"number from 1 to {MAX_CPUS}, or leave it out to detect it")
    cpus = info.get("num_cpus")
    for key in ("num_sockets", "num_cores"):
        value = info.get(key)
        if cpus is not None and value is not None and value > cpus:
            raise SiteError(f"{where}.processor.{key}: {value} is more than num_cpus {cpus}")
    if local and cpus is not None and cpus > cpus_here:
        raise SiteError(f"{where}.processor.num_cpus: {cpus} CPUs, but this host, where the "
                        f"partition's jobs run (local scheduler), has {cpus_here}: give "
                        "this host's count or leave it out to detect it")
    topo = info.get("topology") or {}
    if not isinstance(topo, dict):
        raise SiteError(f"{where}.processor.topology: {topo!r} is not a topology")
    caches = topo.get("caches") or []
    if not isinstance(caches, list):
        raise SiteError(f"{where}.processor.topology.caches: {caches!r} is not a list")
    for i, cache in enumerate(caches):
        key = f"{where}.processor.topology.caches[{i}]"
        if not isinstance(cache, dict):
            raise SiteError(f"{key}: {cache!r} is not a cache description")
        size = cache.get("size")
        if not _whole(size) or size <= 0:
            raise SiteError(f"{key}.size: {size!r} is not a cache size: give its bytes "
                            "(above 0), or leave the processor out to detect it")
        for sub in ("linesize", "num_cpus"):
            value = cache.get(sub)
            if value is not None and (not _whole(value) or value <= 0):
                raise SiteError(f"{key}.{sub}: {value!r} is not a whole number above 0")


def check_extras(where: str, extras: Any, local: bool) -> None:
    """One partition's ``extras`` that hpcval reads."""
    if not isinstance(extras, dict):
        return
    budget = extras.get(sizing.BUDGET_EXTRA)
    if budget is not None and budget not in sizing.BUDGETS:
        raise SiteError(f"{where}.extras.{sizing.BUDGET_EXTRA}: {budget!r} is not a budget: "
                        f"use one of {', '.join(sizing.BUDGETS)}")
    mem = extras.get(sizing.MEMORY_EXTRA)
    if mem is not None:
        key = f"{where}.extras.{sizing.MEMORY_EXTRA}"
        try:
            nbytes = sizing.parse_bytes(mem, key)
        except sizing.SizingError as err:
            raise SiteError(str(err)) from None
        if not MIN_MEMORY <= nbytes <= MAX_MEMORY:
            raise SiteError(f"{key}: {mem!r} ({sizing.human(nbytes)}) is not the memory of a "
                            f"node: give its size, e.g. '256GiB'")
    for key, what in CEILINGS.items():
        ceiling = extras.get(key)
        if ceiling is None:
            continue
        try:
            value = float(ceiling) if not isinstance(ceiling, bool) else math.nan
        except (TypeError, ValueError):
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise SiteError(f"{where}.extras.{key}: {ceiling!r} is not {what}: give a "
                            "positive number")
    for key in ("gpu_memory_bytes", "gpu_l2_bytes"):
        size = extras.get(key)
        if size is not None and (not _whole(size) or size <= 0):
            raise SiteError(f"{where}.extras.{key}: {size!r} is not a size: give bytes "
                            "(above 0), or leave it out to detect it")
    shared = extras.get("shared_fs_dir")
    if shared is not None and local and not Path(str(shared)).is_dir():
        raise EnvironmentFault(f"{where}.extras.shared_fs_dir: {shared!r} is not a directory "
                               "on this host: mount or create it, or fix the path")


def check_mpirun(where: str, env: dict[str, Any]) -> None:
    """An environment's ``extras.mpirun``: an executable file (exit 3 when
    the tool is not there, naming the key)."""
    mpirun = (env.get("extras") or {}).get("mpirun")
    if mpirun is None:
        return
    key = f"{where}.extras.mpirun"
    if not isinstance(mpirun, str) or not mpirun.strip():
        raise SiteError(f"{key}: {mpirun!r} is not a program: give the path of the "
                        "environment's mpirun")
    found = mpirun if os.sep in mpirun else shutil.which(mpirun)
    if found is None or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise EnvironmentFault(f"{key}: {mpirun!r} is not an executable here: install the "
                               "MPI stack (make setup, or the site's Spack environment) or "
                               "fix the path")


def budget_options(reframe_args: Iterable[str]) -> list[tuple[str, str]]:
    """``(option, value)`` of every ``-S budget=`` (also ``-S check.budget=``,
    ``-Sbudget=``, ``--setvar=budget=``) among ReFrame's options."""
    args = list(reframe_args)
    found = []
    for i, arg in enumerate(args):
        text = None
        if arg in ("-S", "--setvar") and i + 1 < len(args):
            text = args[i + 1]
        elif arg.startswith("--setvar="):
            text = arg.removeprefix("--setvar=")
        elif arg.startswith("-S") and len(arg) > 2:
            text = arg[2:]
        if text is None or "=" not in text:
            continue
        name, value = text.split("=", 1)
        if name.rsplit(".", 1)[-1] == sizing.BUDGET_EXTRA:
            found.append((f"-S {text}", value))
    return found


def check_budgets(reframe_args: Iterable[str], environ: dict[str, str] | None = None) -> None:
    """The budget from ``$HPCVAL_BUDGET`` and from ``-S budget=``."""
    environ = os.environ if environ is None else environ
    given = environ.get(sizing.BUDGET_ENV)
    sources = budget_options(reframe_args)
    if given is not None:
        sources.insert(0, (f"${sizing.BUDGET_ENV}", given))
    for source, value in sources:
        if value not in sizing.BUDGETS:
            raise SiteError(f"{source}: {value!r} is not a budget: use one of "
                            f"{', '.join(sizing.BUDGETS)} (docs/checks.md)")


def check_site_values(site: Site, reframe_args: Iterable[str] = (),
                      config: Any = None) -> None:
    """Every value above, of *site*'s config (loaded as ReFrame loads it,
    unless given as *config*); the first wrong one raises."""
    check_budgets(reframe_args)
    cfg = config if config is not None else site.reframe_config()
    envs = {e.get("name"): e for e in cfg["environments"] or []}
    cpus_here = host_cpus()
    for system in cfg["systems"] or []:
        for part in system.get("partitions", []):
            where = f"{site.config}: systems[{system.get('name')}].partitions[{part.get('name')}]"
            local = part.get("scheduler") == "local"
            check_processor(where, part.get("processor"), local, cpus_here)
            check_extras(where, part.get("extras"), local)
            if local:
                for name in part.get("environs", []):
                    if name in envs:
                        check_mpirun(f"{site.config}: environments[{name}]", envs[name])
