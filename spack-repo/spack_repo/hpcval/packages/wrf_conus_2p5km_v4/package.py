"""WRF v4 CONUS 2.5 km benchmark inputs."""

from spack_repo.hpcval.build_systems.benchmark_data import BenchmarkDataPackage

from spack.package import version


class WrfConus2p5kmV4(BenchmarkDataPackage):
    """Inputs of the WRF v4 CONUS 2.5 km benchmark published by NCAR/MMM: the
    2019 pre-Thanksgiving winter storm at 2.5 km; the files as NCAR publishes
    them (namelist.input, wrfinput_d01, wrfbdy_d01).

    Installed unchanged with a sha256 manifest that ``wrf_conus_check``
    verifies (see ``BenchmarkDataPackage``).
    """

    homepage = "https://www2.mmm.ucar.edu/wrf/users/benchmark/benchdata_v422.html"
    url = "https://www2.mmm.ucar.edu/wrf/users/benchmark/v422/v42_bench_conus2.5km.tar.gz"

    # sha256 as published with the Ramble "wrfv4" application (CONUS_2p5km).
    version("4.2.2", sha256="dcae9965d1873c1c1e34e21ad653179783302b9a13528ac10fab092b998578f6")

    # Not declared: v4.4 (https://www2.mmm.ucar.edu/wrf/users/benchmark/v44/
    # v4.4_bench_conus2.5km.tar.gz). NCAR publishes no checksum for it and none
    # was found published elsewhere; a site that has verified its copy by other
    # means adds it to its own repo with `spack checksum`.
