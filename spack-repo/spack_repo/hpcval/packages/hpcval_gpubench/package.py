"""hpcval's own CUDA proxy for copies, GEMM and peer copies (proxies/gpubench)."""

import hashlib
from pathlib import Path

from spack_repo.builtin.build_systems.cuda import CudaPackage
from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import (
    InstallError,
    conflicts,
    depends_on,
    install,
    license,
    mkdirp,
    version,
)

#: This repository lives inside the hpcval checkout (spack-repo/spack_repo/hpcval/packages/
#: hpcval_gpubench/package.py), and the proxy's source is that checkout: there is no tarball.
CHECKOUT = Path(__file__).resolve().parents[5]

#: The proxy's sources: VERSION names them, SHA256SUMS lists the files the build uses
#: with their sha256 (`hpcval spack proxy-version` keeps the two true to each other).
SOURCE = CHECKOUT / "proxies" / "gpubench"


def source_sums() -> dict:
    """File name -> sha256 of every file SHA256SUMS lists (``sha256sum`` format; the
    ``#`` line names the version the sums were written for)."""
    sums = {}
    for line in (SOURCE / "SHA256SUMS").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, _, name = line.partition("  ")
            sums[name.strip()] = digest.strip()
    return sums


class HpcvalGpubench(MakefilePackage, CudaPackage):
    """Host-to-device and device-to-host bandwidth on pinned memory, cuBLAS GEMM
    throughput and GPU-to-GPU copies, one line per timed repetition.

    The version is ``proxies/gpubench/VERSION`` of the hpcval checkout this package
    repository belongs to, and it names the files ``proxies/gpubench/SHA256SUMS``
    lists: an install copies them from the checkout and refuses to build if one
    differs from its sum (edited without bumping VERSION). To build the working
    tree instead: ``spack develop --path <checkout> hpcval-gpubench``.
    """

    homepage = (SOURCE / "README.md").as_uri()

    # Nothing to fetch: the sources are in this checkout, copied in edit().
    has_code = False

    license("BSD-3-Clause")

    version((SOURCE / "VERSION").read_text().strip())

    depends_on("cxx", type="build")
    depends_on("cuda")

    conflicts("~cuda", msg="gpubench is a CUDA program: build it +cuda")
    conflicts("cuda_arch=none", when="+cuda", msg="name the GPUs' cuda_arch (e.g. 90 for H100)")

    build_directory = "proxies/gpubench"

    def edit(self, spec, prefix):
        if "dev_path" in spec.variants:
            return  # developed: the build runs in the working tree itself
        into = Path(self.stage.source_path) / self.build_directory
        mkdirp(str(into))
        for name, digest in source_sums().items():
            if hashlib.sha256((SOURCE / name).read_bytes()).hexdigest() != digest:
                raise InstallError(
                    f"{SOURCE / name} differs from its sum in {SOURCE / 'SHA256SUMS'}: "
                    f"proxies/gpubench changed since VERSION {spec.version}",
                    "bump proxies/gpubench/VERSION and run `hpcval spack proxy-version --update`",
                )
            install(str(SOURCE / name), str(into / name))

    @property
    def build_targets(self) -> list[str]:
        arch_flags = " ".join(CudaPackage.cuda_flags(self.spec.variants["cuda_arch"].value))
        # -B: a developed source tree is shared; never take another build's binary as current
        return ["-B", f"NVCC={self.spec['cuda'].prefix.bin.nvcc}",
                f"CUDA_ARCH_FLAGS={arch_flags}", "gpubench"]

    @property
    def install_targets(self) -> list[str]:
        return [f"PREFIX={self.prefix}", "install"]
