"""Building blocks for site configurations in ``site-configs/<site>/config.py``.

A site config stays declarative: it names its systems and partitions and asks
this module for the parts every hpcval site shares (results store, report
files, perflogs, where the references are) and for the MPI stacks detected on
the machine.
"""

from __future__ import annotations

import os
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from hpcval.core.paths import restore_tmpdir
from hpcval.core.runid import current_run_id
from hpcval.site import SITE_DIR_EXTRA, Site

Environment = dict[str, Any]


def common_sections(site_dir: str | Path) -> dict[str, list[dict[str, Any]]]:
    """The ``general``, ``storage`` and ``logging`` sections of a site.

    Reports, perflogs, stage and output directories go to the site's results
    store (``var/<site>/``, or ``$HPCVAL_VAR/<site>``), one report, stage and
    output directory per run id (:func:`hpcval.core.runid.current_run_id`).
    ReFrame's own results database is off: hpcval's store
    (``var/<site>/history.sqlite``, :mod:`hpcval.history.store`) keeps every run with its
    samples and provenance, and is rebuilt from the JSON run reports at any time.
    """
    restore_tmpdir()  # hpcval validate pointed it at the run's logs for ReFrame's start log
    site = Site.from_dir(site_dir)
    for directory in (site.reports_dir, site.perflogs_dir, site.topology_dir):
        directory.mkdir(parents=True, exist_ok=True)
    return {
        "general": [
            {
                "report_file": str(site.report_path(current_run_id())),
                "topology_prefix": str(site.topology_dir),
                "check_search_path": [str(site.checks_dir)],
                "check_search_recursive": True,
            }
        ],
        "storage": [{"enable": False}],
        "logging": [
            {
                "level": "debug",
                "handlers": [
                    {"type": "stream", "name": "stdout", "level": "info",
                     "format": "%(message)s"},
                    {"type": "file", "name": str(site.reframe_log), "level": "debug",
                     "format": "[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s",
                     "append": True},
                ],
                "handlers_perflog": [
                    {
                        "type": "filelog",
                        "prefix": "%(check_system)s/%(check_partition)s",
                        "level": "info",
                        "format": (
                            "%(check_job_completion_time)s|%(check_info)s|%(check_environ)s|"
                            "%(check_mpi_stack)s|%(check_perf_var)s=%(check_perf_value)s|"
                            "ref=%(check_perf_ref)s (l=%(check_perf_lower_thres)s, "
                            "u=%(check_perf_upper_thres)s)|%(check_perf_unit)s|"
                            "%(check_result)s"
                        ),
                        "append": True,
                        "basedir": str(site.perflogs_dir),
                    }
                ],
            }
        ],
    }


def partition_extras(site_dir: str | Path, **extras: Any) -> dict[str, Any]:
    """``extras`` of a partition: its site directory, plus any others.

    Checks reach every site file, references included, through the site
    directory: :meth:`hpcval.site.Site.of_test`.
    """
    site = Site.from_dir(site_dir)
    return {SITE_DIR_EXTRA: str(site.dir), **extras}


def run_directories(site_dir: str | Path) -> dict[str, str]:
    """``prefix``, ``outputdir`` and ``stagedir`` of a site's system.

    Output and stage directories get one subdirectory per run id, so every
    stored run report keeps pointing at the files it measured, failed runs
    included, and two runs (even started in the same second) never share or
    delete each other's directories.
    """
    site = Site.from_dir(site_dir)
    run_id = current_run_id()
    return {"prefix": str(site.var), "outputdir": str(site.output_dir(run_id)),
            "stagedir": str(site.stage_dir(run_id))}


def intel_mpi_from_pypi(prefix: str | Path | None = None) -> Environment | None:
    """Intel MPI installed from PyPI (``impi-rt``/``impi-devel``) into the
    Python environment that runs ReFrame, or ``None`` when it is not there."""
    prefix = Path(prefix or sys.prefix)
    mpirun = prefix / "bin" / "mpirun"
    if not (mpirun.exists() and (prefix / "lib" / "libmpi.so.12").exists()):
        return None
    try:
        version = metadata.version("impi-rt")
    except metadata.PackageNotFoundError:
        version = "unknown"
    features = ["mpi", "impi"]
    if (prefix / "bin" / "IMB-MPI1").exists():
        features.append("imb")
    lib = str(prefix / "lib")
    return {
        "name": "impi",
        "features": features,
        "cc": str(prefix / "bin" / "mpicc"),
        "cxx": str(prefix / "bin" / "mpicxx"),
        "ftn": str(prefix / "bin" / "mpif90"),
        "env_vars": [
            ["PATH", f"{prefix / 'bin'}:$PATH"],
            ["LD_LIBRARY_PATH", f"{lib}:$LD_LIBRARY_PATH"],
            ["FI_PROVIDER_PATH", lib],
        ],
        "extras": {"mpi_stack": f"intel-mpi@{version}", "mpirun": str(mpirun)},
    }


def _system_mpi(name: str, stack: str, mpirun_name: str, mpicc_name: str,
                env_vars: list[list[str]]) -> Environment | None:
    mpirun = shutil.which(mpirun_name)
    if mpirun is None:
        return None
    mpicc = shutil.which(mpicc_name) or "mpicc"
    return {
        "name": name,
        "features": ["mpi", name],
        "cc": mpicc,
        "env_vars": env_vars,
        "extras": {"mpi_stack": stack, "mpirun": mpirun},
    }


def open_mpi_from_system() -> Environment | None:
    """Debian's/Ubuntu's Open MPI (``mpirun.openmpi``), if installed."""
    return _system_mpi(
        "openmpi", "openmpi (system)", "mpirun.openmpi", "mpicc.openmpi",
        # Open MPI refuses to start as root without these.
        [["OMPI_ALLOW_RUN_AS_ROOT", "1"], ["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"],
         ["OMPI_MCA_rmaps_base_oversubscribe", "1"]],
    )


#: MPICH's Hydra leaves ranks unbound (each may run on every CPU of the node and
#: migrate); Intel MPI pins by default and Open MPI binds to cores (to packages above
#: two ranks). Bound like them, one rank per core (round robin when there are more).
MPICH_BINDING = [["HYDRA_BINDING", "core"]]


def mpich_from_system() -> Environment | None:
    """Debian's/Ubuntu's MPICH (``mpirun.mpich``), if installed."""
    return _system_mpi("mpich", "mpich (system)", "mpirun.mpich", "mpicc.mpich",
                       [list(kv) for kv in MPICH_BINDING])


def plain_environment() -> Environment:
    """No MPI: for checks that run a single process on a node (audits)."""
    return {"name": "plain", "features": ["plain"], "extras": {"mpi_stack": "none"}}


def detected_environments() -> list[Environment]:
    """Every MPI stack found on this machine, Intel MPI from PyPI first, then
    the ``plain`` environment."""
    envs = [intel_mpi_from_pypi(), open_mpi_from_system(), mpich_from_system()]
    return [e for e in envs if e is not None] + [plain_environment()]


#: MPI stacks a Spack environment may build against, offered as programming
#: environments: Spack package name -> extra env_vars (``{lib}``: the MPI's lib/).
SPACK_MPI_STACKS: dict[str, list[list[str]]] = {
    "openmpi": [["OMPI_ALLOW_RUN_AS_ROOT", "1"], ["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"],
                ["OMPI_MCA_rmaps_base_oversubscribe", "1"]],
    "mpich": MPICH_BINDING,
    "mvapich": [],
    # libfabric's providers sit beside libmpi (PyPI wheels and oneAPI alike)
    "intel-oneapi-mpi": [["LD_LIBRARY_PATH", "{lib}:$LD_LIBRARY_PATH"],
                         ["FI_PROVIDER_PATH", "{lib}"]],
}

def _mpi_bin_lib(mpi: dict[str, Any], env_dir: Path) -> tuple[Path, Path]:
    """bin/ and lib/ of an MPI node: its external prefix (through the oneAPI
    layout ``mpi/<version>/`` where there is one) or its Spack install prefix."""
    from hpcval import spack

    prefix = Path(mpi.get("external", {}).get("path") or "")
    if not str(prefix) or str(prefix) == ".":
        prefix = spack.install_prefix(env_dir, f"/{mpi['hash']}") or prefix
    components = sorted((prefix / "mpi").glob("*/bin")) if (prefix / "mpi").is_dir() else []
    base = components[-1].parent if components else prefix
    return base / "bin", base / "lib"


def spack_environments(system: str, stacks: list[str] | None = None) -> list[Environment]:
    """One programming environment per MPI stack that benchmarks of the Spack
    environment ``environments/<system>`` are installed against.

    Each is named ``spack-<mpi>``; programs without MPI (STREAM) get one more,
    ``spack-serial``. Its ``PATH`` leads to the Spack-built
    programs of every benchmark package built against that MPI (IMB, OSU, IOR,
    hpcval-cfdio), each adds a feature (``imb``, ``omb``, ``ior``, ``cfdio``),
    ``extras.spack`` maps each package to its install prefix and concrete spec
    (benchmark, compiler, MPI), and ``extras.spec`` is the IMB one. Empty where
    Spack is not installed, where ``HPCVAL_SPACK=0``, or where nothing is
    installed yet: a site config calling this keeps working without Spack.
    """
    if os.environ.get("HPCVAL_SPACK", "1") == "0":
        return []
    from hpcval import spack

    if spack.find_spack() is None:
        return []
    env_dir = Site.load(system, must_exist=False).spack_env
    if not (env_dir / "spack.yaml").is_file():
        return []
    by_mpi: dict[str, dict[str, Any]] = {}
    serial: dict[str, dict[str, str]] = {}
    for package, prefix in spack.installed_prefixes(env_dir):
        nodes = spack.read_spec_json(prefix)
        mpi = spack.mpi_node(nodes)
        if mpi is None:
            serial[package] = {"prefix": str(prefix), "spec": spack.describe_spec(nodes)}
            continue
        if mpi["name"] not in SPACK_MPI_STACKS:
            continue
        if stacks is not None and mpi["name"] not in stacks:
            continue
        entry = by_mpi.setdefault(mpi["name"], {"mpi": mpi, "packages": {}})
        entry["packages"][package] = {"prefix": str(prefix),
                                      "spec": spack.describe_spec(nodes, mpi["name"])}
    envs = []
    for name in [n for n in SPACK_MPI_STACKS if n in by_mpi]:
        mpi, packages = by_mpi[name]["mpi"], by_mpi[name]["packages"]
        mpi_bin, mpi_lib = _mpi_bin_lib(mpi, env_dir)
        from_os = str(mpi_bin) == "/usr/bin"  # Debian's alternatives: mpirun.openmpi etc.
        mpirun = shutil.which(f"mpirun.{name}") if from_os else None
        mpicc = shutil.which(f"mpicc.{name}") if from_os else None
        bins = [str(Path(p["prefix"]) / "bin") for p in packages.values()
                if (Path(p["prefix"]) / "bin").is_dir()]
        if not from_os:  # the MPI's own launcher helpers (e.g. Intel MPI's mpiexec.hydra)
            bins.append(str(mpi_bin))
        env_vars = [[k, v.format(lib=mpi_lib)] for k, v in SPACK_MPI_STACKS[name]]
        envs.append({
            "name": f"spack-{name}",
            "features": ["mpi", name, "spack",
                         *(spack.BENCHMARK_PACKAGES[p] for p in sorted(packages))],
            "cc": mpicc or str(mpi_bin / "mpicc"),
            "env_vars": [["PATH", ":".join([*bins, "$PATH"])], *env_vars],
            "extras": {
                "mpi_stack": f"{name}@{mpi['version']} (spack:{system})",
                "mpirun": mpirun or str(mpi_bin / "mpirun"),
                "spec": packages.get("intel-mpi-benchmarks", {}).get("spec", ""),
                "spack": packages,
            },
        })
    if serial and stacks is None:
        # programs without MPI (STREAM): one environment, not one per MPI stack
        envs.append({
            "name": "spack-serial",
            "features": ["spack", *(spack.BENCHMARK_PACKAGES[p] for p in sorted(serial))],
            "env_vars": [["PATH", ":".join([*(str(Path(p["prefix"]) / "bin")
                                              for p in serial.values()), "$PATH"])]],
            "extras": {"mpi_stack": f"none (spack:{system})",
                       "spec": next(iter(serial.values()))["spec"], "spack": serial},
        })
    return envs

