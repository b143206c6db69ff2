"""hpcval's own CUDA proxy for copies, GEMM and peer copies (proxies/gpubench)."""

from pathlib import Path

from spack_repo.builtin.build_systems.cuda import CudaPackage
from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import conflicts, depends_on, license, version

#: This repository lives inside the hpcval checkout (spack-repo/spack_repo/hpcval/packages/
#: hpcval_gpubench/package.py), and the proxy's source is that checkout: there is no tarball.
CHECKOUT = Path(__file__).resolve().parents[5]


class HpcvalGpubench(MakefilePackage, CudaPackage):
    """Host-to-device and device-to-host bandwidth on pinned memory, cuBLAS GEMM
    throughput and GPU-to-GPU copies, one line per timed repetition.

    ``hpcval-gpubench@main`` clones the ``main`` branch of the hpcval checkout this
    package repository belongs to and builds ``proxies/gpubench`` from it; develop
    it (``spack develop --path <checkout> hpcval-gpubench@main``) to build the
    working tree.
    """

    homepage = (CHECKOUT / "proxies" / "gpubench" / "README.md").as_uri()
    git = CHECKOUT.as_uri()

    license("BSD-3-Clause")

    version("main", branch="main")

    depends_on("cxx", type="build")
    depends_on("cuda")

    conflicts("~cuda", msg="gpubench is a CUDA program: build it +cuda")
    conflicts("cuda_arch=none", when="+cuda", msg="name the GPUs' cuda_arch (e.g. 90 for H100)")

    build_directory = "proxies/gpubench"

    @property
    def build_targets(self) -> list[str]:
        arch_flags = " ".join(CudaPackage.cuda_flags(self.spec.variants["cuda_arch"].value))
        # -B: a developed source tree is shared; never take another build's binary as current
        return ["-B", f"NVCC={self.spec['cuda'].prefix.bin.nvcc}",
                f"CUDA_ARCH_FLAGS={arch_flags}", "gpubench"]

    @property
    def install_targets(self) -> list[str]:
        return [f"PREFIX={self.prefix}", "install"]
