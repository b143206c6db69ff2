"""ReFrame configuration of the ``local`` site: this workstation.

Local scheduler, ``mpirun`` launcher, processor topology auto-detected by
ReFrame on first use. Programming environments are the MPI stacks detected on
the machine: Intel MPI from PyPI in the Python environment that runs ReFrame
(always, once ``make validate`` has set it up), plus Open MPI and MPICH where
the system has them. References: ``references.yaml`` beside this file.

    reframe -C site-configs/local/config.py -c reframe-checks -r
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
# Plus one environment per MPI stack whose IMB the Spack environment
# environments/local has installed (none where Spack is absent).
ENVIRONMENTS = detected_environments() + spack_environments("local")

site_configuration = {
    "systems": [
        {
            "name": "local",
            "descr": "This workstation (hpcval embedded default site)",
            "hostnames": [".*"],
            "modules_system": "nomod",
            **run_directories(SITE_DIR),
            "partitions": [
                {
                    "name": "default",
                    "descr": "All cores of this machine",
                    "scheduler": "local",
                    "launcher": "mpirun",
                    "environs": [env["name"] for env in ENVIRONMENTS],
                    # Benchmarks must not share the machine with each other.
                    "max_jobs": 1,
                    "extras": partition_extras(SITE_DIR),
                }
            ],
        }
    ],
    "environments": ENVIRONMENTS,
    **common_sections(SITE_DIR),
}
