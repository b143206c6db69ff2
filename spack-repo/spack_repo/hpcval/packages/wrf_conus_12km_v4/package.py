"""WRF v4 CONUS 12 km benchmark inputs."""

from spack_repo.hpcval.build_systems.benchmark_data import BenchmarkDataPackage

from spack.package import version


class WrfConus12kmV4(BenchmarkDataPackage):
    """Inputs of the WRF v4 CONUS 12 km benchmark published by NCAR/MMM: the
    2019 pre-Thanksgiving winter storm at 12 km, 72 s time step; the files as
    NCAR publishes them (namelist.input, wrfinput_d01, wrfbdy_d01 and the restart
    file the benchmark hour starts from).

    Installed unchanged with a sha256 manifest that ``wrf_conus_check``
    verifies (see ``BenchmarkDataPackage``).
    """

    homepage = "https://www2.mmm.ucar.edu/wrf/users/benchmark/benchdata_v422.html"
    url = "https://www2.mmm.ucar.edu/wrf/users/benchmark/v422/v42_bench_conus12km.tar.gz"

    # sha256 as published with the Ramble "wrfv4" application (CONUS_12km).
    version("4.2.2", sha256="6a0e87e3401efddc50539e71e5437fd7a5af9228b64cd4837e739737c3706fc3")

    # Not declared: v4.4 (https://www2.mmm.ucar.edu/wrf/users/benchmark/v44/
    # v4.4_bench_conus12km.tar.gz). NCAR publishes no checksum for it and none
    # was found published elsewhere; a site that has verified its copy by other
    # means adds it to its own repo with `spack checksum`.
