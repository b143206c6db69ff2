"""WRF v4 CONUS 12 km benchmark inputs."""

import hashlib
import os

from spack.package import install_tree, version
from spack_repo.builtin.build_systems.generic import Package


class WrfConus12kmV4(Package):
    """Inputs of the WRF v4 CONUS 12 km benchmark published by NCAR/MMM: the
    2019 pre-Thanksgiving winter storm at 12 km, 72 s time step; the files as
    NCAR publishes them (namelist.input, wrfinput_d01, wrfbdy_d01 and the restart
    file the benchmark hour starts from).

    Installed unchanged; ``hpcval-sha256.txt`` in the prefix lists the sha256 of
    every file, taken at install time from the tarball whose published sha256
    Spack has verified, so that ``wrf_conus_check`` can detect a missing or
    corrupt input on the compute nodes (e.g. on a partial mirror copy).
    """

    homepage = "https://www2.mmm.ucar.edu/wrf/users/benchmark/benchdata_v422.html"
    url = "https://www2.mmm.ucar.edu/wrf/users/benchmark/v422/v42_bench_conus12km.tar.gz"

    # sha256 as published with the Ramble "wrfv4" application (CONUS_12km).
    version("4.2.2", sha256="6a0e87e3401efddc50539e71e5437fd7a5af9228b64cd4837e739737c3706fc3")

    # Not declared: v4.4 (https://www2.mmm.ucar.edu/wrf/users/benchmark/v44/
    # v4.4_bench_conus12km.tar.gz). NCAR publishes no checksum for it and none
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
        env.set("HPCVAL_WRF_CONUS_12KM_V4", self.prefix)
