"""hpcval's CFD result-output proxy (proxies/cfdio)."""

from spack.package import depends_on, version
from spack_repo.builtin.build_systems.makefile import MakefilePackage


class HpcvalCfdio(MakefilePackage):
    """CFD-like MPI proxy: 7-point stencil with halo exchange that writes result
    files with the strategies none, per-rank-then-gather (V10), gather-to-root
    (V11/POSIX) and mpiio, and reports compute, halo and output cost in one line.

    The source is this repository's ``proxies/cfdio``; there is no tarball. Build
    it in an environment with
    ``spack develop --path <checkout>/proxies/cfdio hpcval-cfdio@develop``.
    """

    homepage = "https://example.invalid/hpcval"

    version("develop")

    depends_on("c", type="build")
    depends_on("mpi")

    @property
    def build_targets(self) -> list[str]:
        return [f"MPICC={self.spec['mpi'].mpicc}", "cfdio"]

    @property
    def install_targets(self) -> list[str]:
        return [f"PREFIX={self.prefix}", "install"]
