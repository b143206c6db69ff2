"""hpcval's CFD result-output proxy (proxies/cfdio)."""

from pathlib import Path

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import depends_on, license, version

#: This repository lives inside the hpcval checkout (spack-repo/spack_repo/hpcval/packages/
#: hpcval_cfdio/package.py), and the proxy's source is that checkout: there is no tarball.
CHECKOUT = Path(__file__).resolve().parents[5]


class HpcvalCfdio(MakefilePackage):
    """CFD-like MPI proxy: 7-point stencil with halo exchange that writes result
    files with the strategies none, per-rank-then-gather (V10), gather-to-root
    (V11/POSIX) and mpiio, and reports compute, halo and output cost in one line.

    ``hpcval-cfdio@main`` clones the ``main`` branch of the hpcval checkout this
    package repository belongs to and builds ``proxies/cfdio`` from it. To build
    the working tree instead (uncommitted changes included), develop it:
    ``spack develop --path <checkout> hpcval-cfdio@main`` (``environments/local``
    does this in its ``develop:`` section).
    """

    homepage = (CHECKOUT / "proxies" / "cfdio" / "README.md").as_uri()
    git = CHECKOUT.as_uri()

    license("BSD-3-Clause")

    version("main", branch="main")

    depends_on("c", type="build")
    depends_on("mpi")

    build_directory = "proxies/cfdio"

    @property
    def build_targets(self) -> list[str]:
        # -B: a developed source tree is shared by the builds against each MPI of a matrix;
        # a binary left there by another MPI's build must never be taken as up to date.
        return ["-B", f"MPICC={self.spec['mpi'].mpicc}", "cfdio"]

    @property
    def install_targets(self) -> list[str]:
        return [f"PREFIX={self.prefix}", "install"]
