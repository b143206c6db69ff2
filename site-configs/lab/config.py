"""ReFrame configuration of the ``lab`` site: the Slurm lab on this machine.

``hpcval lab up --nodes N`` builds it: one Slurm node per network namespace
(``lab-n1`` ... ``lab-nN``), partition ``lab``, links shaped by a fabric
profile (``hpcval lab fabric 1g``). Jobs go through Slurm (``sbatch``, polled
with ``squeue``: the lab runs no accounting database), ranks start with
``srun`` (``MpiDefault=pmi2`` in the lab's slurm.conf) and Intel MPI talks
TCP over each node's ``lab0`` interface. References (``references.yaml``) are
for the ``unshaped`` profile.

    hpcval lab up --nodes 2
    reframe -C site-configs/lab/config.py -c reframe-checks --tag internode -r
"""

from pathlib import Path

from hpcval.lab.cluster import current_delay, current_fabric
from hpcval.lab.layout import NODE_IFACE, default_state_dir
from hpcval.lab.slurm import PMI2_LIBRARY, node_cpus
from hpcval.lab.state import LabState
from hpcval.node.topology import processor_info
from hpcval.rfm.site import (
    common_sections,
    intel_mpi_from_pypi,
    partition_extras,
    plain_environment,
    run_directories,
)

SITE_DIR = Path(__file__).resolve().parent


def lab_environments() -> list[dict]:
    """Intel MPI from the Python environment, set up for the lab's TCP links."""
    impi = intel_mpi_from_pypi()
    if impi is None:
        return []
    impi["env_vars"] += [
        # srun --mpi=pmi2 starts the ranks; Intel MPI needs Slurm's PMI2 library
        ["I_MPI_PMI_LIBRARY", PMI2_LIBRARY],
        # shared memory within a node, libfabric TCP between nodes, on the lab link only
        ["I_MPI_FABRICS", "shm:ofi"],
        ["FI_PROVIDER", "tcp"],
        ["FI_TCP_IFACE", NODE_IFACE],
        ["I_MPI_HYDRA_IFACE", NODE_IFACE],
        # the lab's nodes share this machine's cores: yield instead of busy-polling
        ["I_MPI_WAIT_MODE", "1"],
    ]
    impi["features"] = [*impi["features"], "lab"]
    return [impi]


def shared_fs_extras() -> dict[str, str]:
    """``shared_fs_dir``: the file server's directory, mounted at the same path on
    every node (sshfs from ``lab-fs``), where I/O checks write their files, e.g.
    the cfdio output-cost check's result files. Only while the running lab has a
    file server; without one, checks write to their stage directory."""
    state = LabState.load(default_state_dir() / "state.json")
    if state is None or not state.fileserver.get("mount"):
        return {}
    return {"shared_fs_dir": str(state.fileserver["mount"])}


def provenance() -> dict[str, str | None]:
    """Stored with every run (``extras.provenance``): the fabric profile the
    lab's links have when ReFrame reads this config at the start of the run
    (``hpcval lab fabric``) and the delay on them (``lab fabric --delay``:
    ``50us``, ``none``), None while no lab is up."""
    try:
        return {"fabric": current_fabric(), "fabric_delay": current_delay()}
    except Exception:  # noqa: BLE001 - the lab may be down; provenance is best effort
        return {"fabric": None, "fabric_delay": None}


ENVIRONMENTS = [*lab_environments(), plain_environment()]

site_configuration = {
    "systems": [
        {
            "name": "lab",
            "descr": "hpcval lab: Slurm nodes in network namespaces on this machine",
            "hostnames": [".*"],
            "modules_system": "nomod",
            **run_directories(SITE_DIR),
            "partitions": [
                {
                    "name": "lab",
                    "descr": "Lab nodes lab-n1..lab-nN (hpcval lab up)",
                    "scheduler": "squeue",
                    "launcher": "srun",
                    "access": ["--partition=lab"],
                    "environs": [env["name"] for env in ENVIRONMENTS],
                    # nodes share the machine's CPUs: one benchmark job at a time
                    "max_jobs": 1,
                    # 'internode': jobs of this partition can span several nodes
                    "features": ["internode", "slurm"],
                    # lab nodes are namespaces on this host: its processor and
                    # caches (cache-cold buffer sizes), with the CPUs a node gets
                    "processor": {**processor_info(), "num_cpus": node_cpus()},
                    "extras": partition_extras(SITE_DIR, provenance=provenance(),
                                               **shared_fs_extras()),
                }
            ],
        }
    ],
    "environments": ENVIRONMENTS,
    **common_sections(SITE_DIR),
}
