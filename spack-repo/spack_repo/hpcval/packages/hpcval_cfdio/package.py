"""hpcval's CFD result-output proxy (proxies/cfdio)."""

import hashlib
from pathlib import Path

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import InstallError, depends_on, install, license, mkdirp, version

#: This repository lives inside the hpcval checkout (spack-repo/spack_repo/hpcval/packages/
#: hpcval_cfdio/package.py), and the proxy's source is that checkout: there is no tarball.
CHECKOUT = Path(__file__).resolve().parents[5]

#: The proxy's sources: VERSION names them, SHA256SUMS lists the files the build uses
#: with their sha256 (`hpcval spack proxy-version` keeps the two true to each other).
SOURCE = CHECKOUT / "proxies" / "cfdio"


def source_sums() -> dict:
    """File name -> sha256 of every file SHA256SUMS lists (``sha256sum`` format; the
    ``#`` line names the version the sums were written for)."""
    sums = {}
    for line in (SOURCE / "SHA256SUMS").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, _, name = line.partition("  ")
            sums[name.strip()] = digest.strip()
    return sums


class HpcvalCfdio(MakefilePackage):
    """CFD-like MPI proxy: 7-point stencil with halo exchange that writes result
    files with the strategies none, per-rank-then-gather (V10), gather-to-root
    (V11/POSIX) and mpiio, and reports compute, halo and output cost in one line.

    The version is ``proxies/cfdio/VERSION`` of the hpcval checkout this package
    repository belongs to, and it names the files ``proxies/cfdio/SHA256SUMS``
    lists: an install copies them from the checkout and refuses to build if one
    differs from its sum (edited without bumping VERSION). To build the working
    tree instead (uncommitted changes included), develop it:
    ``spack develop --path <checkout> hpcval-cfdio`` (``environments/local`` does
    this in its ``develop:`` section).
    """

    homepage = (SOURCE / "README.md").as_uri()

    # Nothing to fetch: the sources are in this checkout, copied in edit().
    has_code = False

    license("BSD-3-Clause")

    version((SOURCE / "VERSION").read_text().strip())

    depends_on("c", type="build")
    depends_on("mpi")

    build_directory = "proxies/cfdio"

    def edit(self, spec, prefix):
        if "dev_path" in spec.variants:
            return  # developed: the build runs in the working tree itself
        into = Path(self.stage.source_path) / self.build_directory
        mkdirp(str(into))
        for name, digest in source_sums().items():
            if hashlib.sha256((SOURCE / name).read_bytes()).hexdigest() != digest:
                raise InstallError(
                    f"{SOURCE / name} differs from its sum in {SOURCE / 'SHA256SUMS'}: "
                    f"proxies/cfdio changed since VERSION {spec.version}",
                    "bump proxies/cfdio/VERSION and run `hpcval spack proxy-version --update`",
                )
            install(str(SOURCE / name), str(into / name))

    @property
    def build_targets(self) -> list[str]:
        # -B: a developed source tree is shared by the builds against each MPI of a matrix;
        # a binary left there by another MPI's build must never be taken as up to date.
        return ["-B", f"MPICC={self.spec['mpi'].mpicc}", "cfdio"]

    @property
    def install_targets(self) -> list[str]:
        return [f"PREFIX={self.prefix}", "install"]
