"""WRF v3.9.1.1 CONUS 12 km benchmark inputs."""

from spack_repo.hpcval.build_systems.benchmark_data import BenchmarkDataPackage

from spack.package import version


class WrfConus12kmV3(BenchmarkDataPackage):
    """Inputs of the WRF v3.9.1.1 CONUS 12 km benchmark published by NCAR/MMM (the
    data set of the gVNIC article): October 2001 at 12 km, 72 s time step; the files as
    NCAR publishes them (namelist, boundary conditions and the restart file the
    benchmark's three hours start from).

    Installed unchanged with a sha256 manifest that ``wrf_conus_check``
    verifies (see ``BenchmarkDataPackage``).
    """

    homepage = "https://www2.mmm.ucar.edu/wrf/users/benchmark/benchmark.htm"
    url = "https://www2.mmm.ucar.edu/wrf/bench/conus12km_v3911/bench_12km.tar.bz2"

    # sha256 as published with the Ramble "wrfv3" application (CONUS_12km); EESSI
    # publishes the md5 a961ba09bd9ee8081b6d5ef764e7095b of the same file.
    version("3.9.1.1", sha256="0c5ecfc85f2a982f0fa0191371401c1474cf562a7cf97192acd3c9b91ebcc48d")
