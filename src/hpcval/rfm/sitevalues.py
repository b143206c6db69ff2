"""Every value of a site config a run sizes or launches with, checked before
anything runs (``hpcval validate``, before the site lock and the first
benchmark), and again by each check as it is set up on its partition
(:func:`check_test`: plain ``reframe -C site-configs/<site>/config.py`` runs
no ``hpcval validate``), with the same functions.

A value that is wrong is found here, with exit 2 (wrong input) and one line
naming the file and the key, instead of inside the run (where it failed
checks one by one, exit 1) or not at all (a ``num_cpus`` of 1000000 put
``mpirun -np 1000000`` in the job scripts; a cache of -1 B, or of 1 B, sized
the triad into the cache and it passed; a cache of 1 PB made the triad skip
itself and the run passed). A tool a value names that is not there (the
environment's ``extras.mpirun``) is an environment fault, exit 3, naming the
key too (README: exit codes). Under plain ReFrame the same finding fails the
check in its setup, with the same line as its reason (before any launch).

What is checked:

- each partition's ``processor`` (ReFrame's schema takes these keys only:
  a ``num_cores`` is refused by ReFrame before hpcval sees it): ``num_cpus``,
  ``num_sockets``, ``num_cpus_per_core``, ``num_cpus_per_socket`` whole
  numbers above 0 and at most :data:`MAX_CPUS`; sockets no more than CPUs;
  for a partition whose jobs run on this host (``local`` scheduler), no more
  CPUs than this host has; every ``topology.caches`` entry with a ``size``
  from :data:`MIN_CACHE` to :data:`MAX_CACHE` (and ``linesize``,
  ``num_cpus`` above 0 where given); the last-level cache of the node (every
  instance of the highest level together) at least :data:`MIN_LAST_LEVEL`, at
  most :data:`MAX_LAST_LEVEL` and less than the node's memory where known
  (``mem_per_node``, or this host's for a local partition), and for a local
  partition no smaller than one last-level cache of this host as ReFrame
  detects it;
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
from hpcval.node import sizing, topology
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

#: No CPU cache is smaller (L1 caches have been 8 KiB or more for decades).
MIN_CACHE = 1 << 10
#: More than any one cache (the largest L3 is AMD's stacked one: 96 MiB a die,
#: 1,152 MiB a socket).
MAX_CACHE = 4 << 30
#: A node's last-level cache is at least this (a Raspberry Pi Zero's L2 is 128
#: KiB); less is a list of the first levels only, or a wrong unit.
MIN_LAST_LEVEL = 128 << 10
#: More last-level cache than any node has (eight sockets of the largest L3).
MAX_LAST_LEVEL = 16 << 30

_COUNTS = ("num_cpus", "num_sockets", "num_cpus_per_core", "num_cpus_per_socket")


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def host_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or os.cpu_count() or 1
    except OSError:
        return os.cpu_count() or 1


def check_processor(where: str, info: Any, local: bool, cpus_here: int,
                    mem_bytes: int | None = None,
                    host: topology.Topology | None = None) -> None:
    """One partition's ``processor`` (``where``: the file and the partition;
    *mem_bytes*: the node's memory where known; *host*: this host's topology,
    for a local partition)."""
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
    sockets = info.get("num_sockets")
    if cpus is not None and sockets is not None and sockets > cpus:
        raise SiteError(f"{where}.processor.num_sockets: {sockets} is more than num_cpus {cpus}")
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
        if not _whole(size) or not MIN_CACHE <= size <= MAX_CACHE:
            raise SiteError(f"{key}.size: {size!r} is not a cache size: give its bytes "
                            f"(from {sizing.human(MIN_CACHE)} to {sizing.human(MAX_CACHE)}), "
                            "or leave the processor out to detect it")
        for sub in ("linesize", "num_cpus"):
            value = cache.get(sub)
            if value is not None and (not _whole(value) or value <= 0):
                raise SiteError(f"{key}.{sub}: {value!r} is not a whole number above 0")
    _check_last_level(where, caches, local, mem_bytes, host)


def _check_last_level(where: str, caches: list[dict[str, Any]], local: bool,
                      mem_bytes: int | None, host: topology.Topology | None) -> None:
    """The node's last-level cache, which sizes STREAM, the triad and the
    stencil: one too small sizes them into the cache (they measure it and
    pass), one too large makes them skip (nothing is measured)."""
    total = topology.total_last_level_cache(caches)
    if total is None:
        return
    key = f"{where}.processor.topology.caches"
    said = f"last-level cache {sizing.human(total)}"
    fix = "list every cache level with its bytes, or leave the topology out to detect it"
    if total < MIN_LAST_LEVEL:
        raise SiteError(f"{key}: {said} (the highest level listed), less than any node has "
                        f"(at least {sizing.human(MIN_LAST_LEVEL)}): {fix}")
    if total > MAX_LAST_LEVEL or (mem_bytes is not None and total >= mem_bytes):
        bound = (f"the node's memory {sizing.human(mem_bytes)}"
                 if mem_bytes is not None and total <= MAX_LAST_LEVEL
                 else f"{sizing.human(MAX_LAST_LEVEL)}, more than any node has")
        raise SiteError(f"{key}: {said}, not less than {bound}: {fix}")
    if local and host is not None and host.llc_bytes and total < host.llc_bytes:
        raise SiteError(f"{key}: {said}, but this host, where the partition's jobs run "
                        f"(local scheduler), has {sizing.human(host.llc_bytes)} in one "
                        f"last-level cache (detected): a size from the smaller one would "
                        f"measure the cache; {fix}")


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


def partition_where(config: Path | str, system: Any, partition: Any) -> str:
    """How an error names a partition: the file, the system and the partition."""
    return f"{config}: systems[{system}].partitions[{partition}]"


def node_memory(extras: Any, local: bool) -> int | None:
    """The node's memory: ``extras.mem_per_node`` (checked first by
    :func:`check_extras`), else this host's for a local partition."""
    mem = extras.get(sizing.MEMORY_EXTRA) if isinstance(extras, dict) else None
    if mem is not None:
        return sizing.parse_bytes(mem)
    return sizing.host_memory() if local else None


def check_partition(where: str, processor: Any, extras: Any, local: bool,
                    cpus_here: int | None = None) -> None:
    """Every value of one partition (its ``processor`` and ``extras``)."""
    check_extras(where, extras, local)
    host = topology.this_host() if local else None
    check_processor(where, processor, local, host_cpus() if cpus_here is None else cpus_here,
                    node_memory(extras, local), host)


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
            where = partition_where(site.config, system.get("name"), part.get("name"))
            local = part.get("scheduler") == "local"
            check_partition(where, part.get("processor"), part.get("extras"), local, cpus_here)
            if local:
                for name in part.get("environs", []):
                    if name in envs:
                        check_mpirun(f"{site.config}: environments[{name}]", envs[name])


def check_test(test: Any) -> None:
    """The values of the partition and programming environment *test* was
    set up on, as :func:`check_site_values` checks them: under plain ReFrame
    no ``hpcval validate`` ran before. A wrong one fails the check, before
    anything is launched, with the line ``hpcval validate`` prints. In a dry run
    (``reframe --dry-run``: a site's job scripts drawn for other machines)
    only the values no machine has are refused."""
    from hpcval.rfm.launch import ConfigFailure

    part = test.current_partition
    # a dry run launches nothing on this host: what no machine has is still
    # refused, the comparisons with this host (CPUs, caches, mpirun) are not made
    local = part.scheduler.registered_name == "local" and not test.is_dry_run()
    try:
        config: Path | str = Site.of_test(test).config
    except SiteError:
        config = "site config"
    where = partition_where(config, test.current_system.name, part.name)
    try:
        check_partition(where, part.processor.info, part.extras, local)
        if local:
            environ = test.current_environ
            check_mpirun(f"{config}: environments[{environ.name}]",
                         {"extras": dict(environ.extras)})
    except (SiteError, EnvironmentFault) as err:
        raise ConfigFailure(str(err)) from None
