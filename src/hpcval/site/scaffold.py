"""``hpcval site new``: a new site from what this machine shows.

It detects the scheduler (Slurm when ``sinfo`` answers, with one ReFrame
partition per Slurm partition; else the local scheduler), the launcher that
goes with it (``srun``, else the MPI stack's own ``mpirun``), and writes:

- ``site-configs/<name>/config.py``: a ReFrame configuration built from
  :mod:`hpcval.rfm.site` (MPI stacks and processor topology are detected when
  the configuration is read, so it stays right when the machine changes);
- ``site-configs/<name>/judging.yaml``: the statistical settings, defaults
  spelled out for review;
- ``environments/<name>/spack.yaml``: the site's Spack environment, a copy of
  the ``local`` one to adapt (compilers, externals, target).

Where ``nvidia-smi`` shows GPUs (or ``--gpus-csv`` gives a recorded
``nvidia-smi --query-gpu`` of a node), the partition gets them in ReFrame's
terms: the ``gpu`` feature, ``devices`` and the ``gpu_*`` extras
(:mod:`hpcval.node.gpus`). References and host expectations are not guessed:
``hpcval validate --site <name> --record`` measures them (docs/adding-a-site.md).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from hpcval import spack
from hpcval.core.errors import HpcvalError, InputError
from hpcval.core.fileio import atomic_write
from hpcval.node.gpus import NodeGpus, query_this_node
from hpcval.site import Site, validate_name


@dataclass(frozen=True)
class SlurmPartition:
    name: str
    nodes: int
    cpus: int


def slurm_partitions(timeout: float = 10.0) -> list[SlurmPartition]:
    """Slurm's partitions as ``sinfo`` reports them; empty without Slurm."""
    if shutil.which("sinfo") is None:
        return []
    try:
        proc = subprocess.run(["sinfo", "-h", "-o", "%R %D %c"], capture_output=True,
                              text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if proc.returncode != 0:
        return []
    parts: dict[str, SlurmPartition] = {}
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) != 3 or not fields[1].isdigit():
            continue
        cpus = int(fields[2].rstrip("+")) if fields[2].rstrip("+").isdigit() else 0
        old = parts.get(fields[0])
        nodes = int(fields[1]) + (old.nodes if old else 0)
        parts[fields[0]] = SlurmPartition(fields[0], nodes, max(cpus, old.cpus if old else 0))
    return list(parts.values())


def _has_accounting() -> bool:
    if shutil.which("sacct") is None:
        return False
    try:
        proc = subprocess.run(["sacct", "-n", "-X", "-S", "now"], capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


_HEADER = '''"""ReFrame configuration of the ``{name}`` site, made by ``hpcval site new``.

{what}
MPI stacks (programming environments) and the processor topology are detected
when ReFrame reads this file. References: ``references.yaml`` beside it, written
by ``hpcval validate --site {name} --record`` (docs/adding-a-site.md).
"""

from pathlib import Path

from hpcval.rfm.site import (
    common_sections,
    detected_environments,
    partition_extras,
    run_directories,
    spack_environments,
)

SITE_DIR = Path(__file__).resolve().parent
ENVIRONMENTS = detected_environments() + spack_environments("{name}")
'''

_LOCAL_PARTITION = '''                {{
                    "name": "default",
                    "descr": "All cores of this machine",
                    "scheduler": "local",
                    "launcher": "mpirun",
                    "environs": [env["name"] for env in ENVIRONMENTS],
                    # benchmarks must not share the machine with each other
                    "max_jobs": 1,
{gpu}                    "extras": partition_extras(SITE_DIR{gpu_extras}),
                }},
'''

_SLURM_PARTITION = '''                {{
                    "name": "{ident}",
                    "descr": "Slurm partition {name} ({nodes} nodes, {cpus} CPUs each)",
                    "scheduler": "{scheduler}",
                    "launcher": "srun",
                    "access": ["--partition={name}"],
                    "environs": [env["name"] for env in ENVIRONMENTS],
                    "max_jobs": 4,
                    "features": [{features}],
                    "processor": {{"num_cpus": {cpus}}},
{gpu}                    "extras": partition_extras(SITE_DIR{gpu_extras}),
                }},
'''

_SYSTEM = '''
site_configuration = {{
    "systems": [
        {{
            "name": "{name}",
            "descr": "{descr}",
            "hostnames": [".*"],
            "modules_system": "nomod",
            **run_directories(SITE_DIR),
            "partitions": [
{partitions}            ],
        }}
    ],
    "environments": ENVIRONMENTS,
    **common_sections(SITE_DIR),
}}
'''

JUDGING_TEMPLATE = """# Judging of site {name!r} against its own history (docs/judging.md).
# k: accepted runs in a figure's baseline; threshold: the smallest relative change
# that matters; alpha: false-alarm rate over all figures of one run.
k: 5
threshold: 0.05
alpha: 0.05
# Per figure, by check/variable glob, e.g.:
# figures:
#   "imb_pingpong*/lat_*": {{threshold: 0.20}}
"""


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "part"


def _gpu_lines(gpus: NodeGpus | None) -> tuple[str, str]:
    """The ``devices`` line and the extras arguments of a partition with *gpus*."""
    if gpus is None:
        return "", ""
    fields = gpus.partition_fields()
    extras = "".join(f", {k}={v!r}" for k, v in fields["extras"].items())
    return (f'                    # {gpus.count} GPU(s) per node, found by nvidia-smi\n'
            f'                    "devices": {fields["devices"]!r},\n'), extras


def _features(features: list[str], gpus: NodeGpus | None) -> str:
    extra = [f for f in (gpus.partition_fields()["features"] if gpus else [])
             if f not in features]
    return ", ".join(f'"{f}"' for f in [*features, *extra])


def config_text(name: str, scheduler: str, partitions: list[SlurmPartition],
                gpus: NodeGpus | None = None, gpu_partitions: tuple[str, ...] = ()) -> str:
    """The ``config.py`` of a new site. *gpus*: the GPUs of a node of the local
    partition, or of each Slurm partition named in *gpu_partitions*."""
    if scheduler == "local":
        devices, extras = _gpu_lines(gpus)
        if gpus is not None:
            devices = f'                    "features": [{_features([], gpus)}],\n' + devices
        parts = _LOCAL_PARTITION.format(gpu=devices, gpu_extras=extras)
        what = "This machine: local scheduler, each MPI stack's own ``mpirun``."
        descr = "This machine (local scheduler)"
    else:
        sched = "slurm" if _has_accounting() else "squeue"
        unknown = sorted(set(gpu_partitions) - {p.name for p in partitions})
        if unknown:
            raise InputError(f"--gpu-partition {', '.join(unknown)}: no such Slurm partition "
                             f"(sinfo shows {', '.join(p.name for p in partitions)})")
        parts = ""
        for p in partitions:
            node_gpus = gpus if p.name in gpu_partitions else None
            devices, extras = _gpu_lines(node_gpus)
            features = ["internode", "slurm"] if p.nodes > 1 else ["slurm"]
            parts += _SLURM_PARTITION.format(
                ident=_ident(p.name), name=p.name, nodes=p.nodes, cpus=p.cpus, scheduler=sched,
                features=_features(features, node_gpus), gpu=devices, gpu_extras=extras)
        note = ", no accounting database" if sched == "squeue" else ""
        what = (f"Slurm (scheduler ``{sched}``{note}), ranks started with ``srun``; one "
                "partition per Slurm partition.")
        descr = f"Slurm cluster ({len(partitions)} partition(s))"
    return _HEADER.format(name=name, what=what) + _SYSTEM.format(
        name=name, descr=descr, partitions=parts)


def new_site(name: str, root: Path | None = None, scheduler: str = "auto",
             venv: Path | None = None, gpus: NodeGpus | None | str = "detect",
             gpu_partitions: tuple[str, ...] = ()) -> list[Path]:
    """Write a new site's files; refuses to touch an existing site. Where the
    copied spack.yaml includes the generated Intel MPI external
    (:data:`hpcval.spack.VENV_MPI_INCLUDE`), it is written too, from *venv*
    (default: the venv running hpcval) when that has the Intel MPI wheels:
    ``make setup`` wrote it only for the environments that existed then.
    *gpus*: ``"detect"`` asks this machine's ``nvidia-smi`` (for the local
    partition only: a login node's GPUs say nothing of a Slurm partition's), or
    the GPUs of a node (:func:`hpcval.node.gpus.read_query`), or ``None``. With Slurm
    they go to the partitions named in *gpu_partitions*."""
    validate_name(name, "site name")
    site = Site.load(name, root, must_exist=False)
    if site.dir.exists():
        raise InputError(f"{site.dir}: the site exists already; choose another name or "
                         "edit its files")
    partitions = slurm_partitions() if scheduler in ("auto", "slurm") else []
    if scheduler == "slurm" and not partitions:
        raise InputError("--scheduler slurm: sinfo reports no partition on this machine")
    chosen = "slurm" if partitions else "local"
    if gpu_partitions and (chosen != "slurm" or not isinstance(gpus, NodeGpus)):
        raise InputError("--gpu-partition needs Slurm partitions and --gpus-csv (the "
                         "nvidia-smi --query-gpu output of a node of that partition)")
    if chosen == "slurm" and isinstance(gpus, NodeGpus) and not gpu_partitions:
        raise InputError("--gpus-csv: this machine has Slurm partitions (sinfo shows "
                         f"{', '.join(p.name for p in partitions)}): name the one(s) whose "
                         "nodes have these GPUs with --gpu-partition NAME, or give "
                         "--scheduler local for a site of this machine alone")
    if gpus == "detect":
        gpus = query_this_node() if chosen == "local" else None
    node_gpus = gpus if isinstance(gpus, NodeGpus) else None
    written = [atomic_write(site.config, config_text(name, chosen, partitions, node_gpus,
                                                     gpu_partitions),
                            "writing the site config"),
               atomic_write(site.judging, JUDGING_TEMPLATE.format(name=name),
                            "writing judging settings")]
    template = Site("local", site.root).spack_env / "spack.yaml"
    target = site.spack_env / "spack.yaml"
    if template.is_file() and not target.exists():
        text = template.read_text()
        written.append(atomic_write(target, (
            f"# Spack environment of site {name!r}, copied from environments/local by "
            "`hpcval site new`:\n# declare this system's compilers, MPI and Slurm as "
            "externals and its target (docs/spack.md).\n") + text, "writing spack.yaml"))
        if spack.VENV_MPI_INCLUDE in text:
            try:
                made = spack.write_venv_externals(venv or Path(sys.prefix), site.root)
            except HpcvalError:
                made = []  # no Intel MPI wheels here: `hpcval spack doctor` says what to do
            written += [p for p in made if p.parent == site.spack_env]
    return written
