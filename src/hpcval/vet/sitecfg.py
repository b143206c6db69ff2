"""What vetting takes from a site: its Slurm partition, its MPI environment,
its host expectations and references.

The site's ReFrame configuration (``site-configs/<site>/config.py``) is the one
description of the machine: vetting reads the partition's access options and
the Intel MPI environment's variables from it (on the lab: PMI2 library,
``FI_PROVIDER=tcp``, ``FI_TCP_IFACE=lab0``, ``I_MPI_WAIT_MODE=1``), so vetting
runs MPI exactly as the checks do.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval.errors import SiteError
from hpcval.references import load_references, parse_reference
from hpcval.site import Site
from hpcval.vet.judge import FIGURES

#: Where the site's references for the vetting figures live: figure -> (check, variable).
REFERENCE_SOURCES = {
    "pingpong_bw_1MiB": ("imb_pingpong_internode_check", "bw_1MiB"),
    "shm_pingpong_bw_1MiB": ("imb_pingpong_check", "bw_1MiB"),
    "triad_bw": ("cfdio_triad_check", "triad_bw"),
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

    @property
    def host_expectations(self) -> Path | None:
        path = Site.from_dir(self.dir).host_expectations
        return path if path.exists() else None

    def references(self) -> dict[str, tuple[float, str]]:
        """figure -> (bound, where it comes from), for the figures the site has."""
        path = Site.from_dir(self.dir).references
        if not path.exists():
            return {}
        data = {name: ({"$index": list(e.index), **e.data} if e.index else e.data)
                for name, e in load_references(path).entries.items()}
        out = {}
        for fig, (check, var) in REFERENCE_SOURCES.items():
            found = _find(data.get(check), var,
                          [f"{self.system}:{self.partition}", self.partition, "*", "warm"])
            if found is None:
                continue
            ref = parse_reference(found, str(path), f"{check}.{var}")
            low, high = ref.bounds()
            bound = low if FIGURES[fig].better == "higher" else high
            if bound is not None:
                out[fig] = (bound, f"{path.name}: {check} {var}")
        return out


def _find(entry: Any, var: str, keys: list[str]) -> Any:
    """The reference list of ``var`` in a check's entry, trying ``keys`` level by level."""
    if not isinstance(entry, dict):
        return None
    if var in entry and isinstance(entry[var], list):
        return entry[var]
    for key in keys:
        if key in entry:
            found = _find(entry[key], var, keys)
            if found is not None:
                return found
    return None


def _load_config(path: Path) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location(f"hpcval_site_{path.parent.name}", path)
    if spec is None or spec.loader is None:
        raise SiteError(f"{path}: cannot load the site config")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # a broken site config: say which file
        raise SiteError(f"{path}: the site config fails to load: {err}") from None
    cfg = getattr(module, "site_configuration", None)
    if not isinstance(cfg, dict):
        raise SiteError(f"{path}: no site_configuration dictionary")
    return cfg


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
    cfg = _load_config(found.config)
    systems = cfg.get("systems") or []
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
    envs = {e["name"]: e for e in cfg.get("environments", [])}
    if environ not in envs or environ not in part.get("environs", []):
        raise SiteError(f"{sdir / 'config.py'}: partition '{part['name']}' has no environment "
                        f"'{environ}' (vetting runs IMB and the triad proxy with Intel MPI; "
                        "install it with 'make setup' or name another with --environ)")
    env = envs[environ]
    return VetSite(
        name=site, dir=sdir, var=found.var, system=system["name"],
        partition=part["name"], slurm_partition=slurm_name(part), env_name=environ,
        env=expand_env(env.get("env_vars", []), dict(os.environ)), cc=env.get("cc") or "mpicc",
        gpus="gpu" in part.get("features", []))
