"""WRF v4 CONUS 2.5 km benchmark inputs."""

import hashlib
import os

from spack.package import install_tree, version
from spack_repo.builtin.build_systems.generic import Package


class WrfConus2p5kmV4(Package):
    """Inputs of the WRF v4 CONUS 2.5 km benchmark published by NCAR/MMM: the
    2019 pre-Thanksgiving winter storm at 2.5 km; the files as NCAR publishes
    them (namelist.input, wrfinput_d01, wrfbdy_d01).

    Installed unchanged; ``hpcval-sha256.txt`` in the prefix lists the sha256 of
    every file, taken at install time from the tarball whose published sha256
    Spack has verified, so that ``wrf_conus_check`` can detect a missing or
    corrupt input on the compute nodes (e.g. on a partial mirror copy).
    """

    homepage = "https://www2.mmm.ucar.edu/wrf/users/benchmark/benchdata_v422.html"
    url = "https://www2.mmm.ucar.edu/wrf/users/benchmark/v422/v42_bench_conus2.5km.tar.gz"

    # sha256 as published with the Ramble "wrfv4" application (CONUS_2p5km).
    version("4.2.2", sha256="dcae9965d1873c1c1e34e21ad653179783302b9a13528ac10fab092b998578f6")

    # Not declared: v4.4 (https://www2.mmm.ucar.edu/wrf/users/benchmark/v44/
    # v4.4_bench_conus2.5km.tar.gz). NCAR publishes no checksum for it and none
    # was found published elsewhere; a site that has verified its copy by other
    # means adds it to its own repo with `spack checksum`.

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
        env.set("HPCVAL_WRF_CONUS_2P5KM_V4", self.prefix)
