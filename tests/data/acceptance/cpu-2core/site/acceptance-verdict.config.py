"""ReFrame configuration of the ``acceptance-verdict`` site, made by ``hpcval site new``.

This machine: local scheduler, each MPI stack's own ``mpirun``.
MPI stacks (programming environments) and the processor topology are detected
when ReFrame reads this file. References: ``references.yaml`` beside it, written
by ``hpcval validate --site acceptance-verdict --record`` (docs/adding-a-site.md).
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
ENVIRONMENTS = detected_environments() + spack_environments("acceptance-verdict")

site_configuration = {
    "systems": [
        {
            "name": "acceptance-verdict",
            "descr": "This machine (local scheduler)",
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
                    # benchmarks must not share the machine with each other
                    "max_jobs": 1,
                    "extras": partition_extras(SITE_DIR),
                },
            ],
        }
    ],
    "environments": ENVIRONMENTS,
    **common_sections(SITE_DIR),
}
