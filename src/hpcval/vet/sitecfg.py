"""What vetting takes from a site: its Slurm partition, its MPI environment,
its host expectations and references.

The site's ReFrame configuration (``site-configs/<site>/config.py``), loaded
as ReFrame loads it (:meth:`hpcval.site.Site.reframe_config`), is the one
description of the machine: vetting reads the partition's access options and
the Intel MPI environment's variables from it (on the lab: PMI2 library,
``FI_PROVIDER=tcp``, ``FI_TCP_IFACE=lab0``, ``I_MPI_WAIT_MODE=1``), so vetting
runs MPI exactly as the checks do. Its references are the checks' own,
resolved for the case vetting measures as a run resolves them
(:func:`hpcval.site.refresolve.resolve`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval.core.errors import ReferencesError, SiteError
from hpcval.node import sizing, topology
from hpcval.site import Site
from hpcval.site.refresolve import resolve
from hpcval.vet.judge import FIGURES

#: Where the site's references for the vetting figures live: figure -> (check,
#: variable, the parameters of the case vetting measures). IMB runs with warm
#: caches, as IMB does by default.
REFERENCE_SOURCES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "pingpong_bw_1MiB": ("imb_pingpong_internode_check", "bw_1MiB", {"cache": "warm"}),
    "shm_pingpong_bw_1MiB": ("imb_pingpong_check", "bw_1MiB", {"cache": "warm"}),
    "triad_bw": ("cfdio_triad_check", "triad_bw", {}),
}


@dataclass
class VetSite:
    name: str
    dir: Path
    var: Path
    system: str
    partition: str  # ReFrame partition name
    slurm_partition: str
    env_name: str
    env: dict[str, str] = field(default_factory=dict)
    cc: str = "mpicc"
    #: the partition has the ``gpu`` feature: vetting measures its GPUs too
    gpus: bool = False
    #: one node of the partition as the site config describes it (``processor``,
    #: ``extras.mem_per_node``): what the per-node problem sizes come from
    node: sizing.Node = field(default_factory=lambda: sizing.Node(None, None, None))

    @property
    def host_expectations(self) -> Path | None:
        path = Site.from_dir(self.dir).host_expectations
        return path if path.exists() else None

    def references(self) -> dict[str, tuple[float, str]]:
        """figure -> (bound, where it comes from), for the figures the site has
        a reference for on this partition and environment."""
        site = Site.from_dir(self.dir)
        if not site.references.exists():
            return {}
        ref_file = site.load_references()
        out = {}
        for fig, (check, var, params) in REFERENCE_SOURCES.items():
            entry = ref_file.entries.get(check)
            if entry is None:
                continue
            try:
                refs = resolve(entry, ref_file.path, lambda a, p=params: self._attribute(a, p),
                               self.system, self.partition)
            except ReferencesError:
                continue  # no reference applies to this case: the figure is not bounded
            if var not in refs:
                continue
            low, high = refs[var].bounds()
            bound = low if FIGURES[fig].better == "higher" else high
            if bound is not None:
                out[fig] = (bound, f"{ref_file.path.name}: {check} {var}")
        return out

    def _attribute(self, name: str, params: dict[str, Any]) -> Any:
        """An index attribute of the case vetting measures (as a check's ``$index``
        names it); :class:`AttributeError` for one vetting does not know."""
        special = {"$system": self.system, "$partition": f"{self.system}:{self.partition}",
                   "$environ": self.env_name}
        if name in special:
            return special[name]
        if name in params:
            return params[name]
        raise AttributeError(name)


_VAR = re.compile(r"\$(\w+)|\$\{(\w+)\}")


def expand_env(pairs: list[list[str]], base: dict[str, str]) -> dict[str, str]:
    """``base`` with the environment's variables set in order, ``$VAR`` expanded."""
    env = dict(base)
    for name, value in pairs:
        env[name] = _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), str(value))
    return env


def load(site: str, partition: str | None = None, environ: str = "impi") -> VetSite:
    """The site's partition (by ReFrame or Slurm name; the first with a Slurm
    scheduler if None) and MPI environment ``environ``."""
    found = Site.load(site)
    sdir = found.dir
    cfg = found.reframe_config()
    systems = cfg["systems"]
    parts = [(s, p) for s in systems for p in s.get("partitions", [])
             if p.get("scheduler") in ("slurm", "squeue")]
    if not parts:
        raise SiteError(f"{sdir / 'config.py'}: systems.partitions: no partition with scheduler "
                        "'slurm' or 'squeue'; vetting needs a Slurm partition")

    def slurm_name(p: dict[str, Any]) -> str:
        for opt in p.get("access", []):
            if opt.startswith(("--partition=", "-p")):
                return opt.split("=", 1)[1] if "=" in opt else opt[2:]
        return str(p["name"])

    if partition is not None:
        match = [(s, p) for s, p in parts if partition in (p["name"], slurm_name(p))]
        if not match:
            known = ", ".join(sorted({slurm_name(p) for _, p in parts}))
            raise SiteError(f"{sdir / 'config.py'}: no Slurm partition '{partition}' "
                            f"(known: {known}); exit 2")
        parts = match
    system, part = parts[0]
    envs = {e["name"]: e for e in cfg["environments"]}
    if environ not in envs or environ not in part.get("environs", []):
        raise SiteError(f"{sdir / 'config.py'}: partition '{part['name']}' has no environment "
                        f"'{environ}' (vetting runs IMB and the triad proxy with Intel MPI; "
                        "install it with 'make setup' or name another with --environ)")
    env = envs[environ]
    mem = (part.get("extras") or {}).get(sizing.MEMORY_EXTRA)
    where = f"{sdir / 'config.py'}: partition '{part['name']}' extras {sizing.MEMORY_EXTRA}"
    node = sizing.Node.of(topology.of_processor(part.get("processor")),
                          sizing.parse_bytes(mem, where) if mem is not None else None)
    return VetSite(
        name=site, dir=sdir, var=found.var, system=system["name"],
        partition=part["name"], slurm_partition=slurm_name(part), env_name=environ,
        env=expand_env(env.get("env_vars", []), dict(os.environ)), cc=env.get("cc") or "mpicc",
        gpus="gpu" in part.get("features", []), node=node)
