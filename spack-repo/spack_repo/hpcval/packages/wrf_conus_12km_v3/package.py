"""WRF v3.9.1.1 CONUS 12 km benchmark inputs."""

import hashlib
import os

from spack.package import install_tree, version
from spack_repo.builtin.build_systems.generic import Package


class WrfConus12kmV3(Package):
    """Inputs of the WRF v3.9.1.1 CONUS 12 km benchmark published by NCAR/MMM (the
    data set of seed 000): October 2001 at 12 km, 72 s time step; the files as
    NCAR publishes them (namelist, boundary conditions and the restart file the
    benchmark's three hours start from).

    Installed unchanged; ``hpcval-sha256.txt`` in the prefix lists the sha256 of
    every file, taken at install time from the tarball whose published sha256
    Spack has verified, so that ``wrf_conus_check`` can detect a missing or
    corrupt input on the compute nodes (e.g. on a partial mirror copy).
    """

    homepage = "https://www2.mmm.ucar.edu/wrf/users/benchmark/benchmark.htm"
    url = "https://www2.mmm.ucar.edu/wrf/bench/conus12km_v3911/bench_12km.tar.bz2"

    # sha256 as published with the Ramble "wrfv3" application (CONUS_12km); EESSI
    # publishes the md5 a961ba09bd9ee8081b6d5ef764e7095b of the same file.
    version("3.9.1.1", sha256="0c5ecfc85f2a982f0fa0191371401c1474cf562a7cf97192acd3c9b91ebcc48d")

    def install(self, spec, prefix):
        install_tree(".", prefix)
        lines = []
        for top, _dirs, files in os.walk(prefix):
            for name in sorted(files):
                path = os.path.join(top, name)
                rel = os.path.relpath(path, prefix)
                if rel.startswith(".spack") or rel == "hpcval-sha256.txt":
                    continue
                digest = hashlib.sha256()
                with open(path, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 22), b""):
                        digest.update(block)
                lines.append(f"{digest.hexdigest()}  {rel}\n")
        with open(os.path.join(prefix, "hpcval-sha256.txt"), "w") as fh:
            fh.writelines(sorted(lines, key=lambda line: line.split(None, 1)[1]))

    def setup_run_environment(self, env):
        env.set("HPCVAL_WRF_CONUS_12KM_V3", self.prefix)
