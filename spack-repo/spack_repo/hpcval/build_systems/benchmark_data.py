"""Base class of hpcval's benchmark-input packages."""

import hashlib
import os

from spack_repo.builtin.build_systems.generic import Package

from spack.package import install_tree

MANIFEST = "hpcval-sha256.txt"


class BenchmarkDataPackage(Package):
    """Benchmark inputs installed unchanged, plus ``hpcval-sha256.txt`` listing
    the sha256 of every file, taken at install time from the tarball whose
    published sha256 Spack has verified, so that a check can detect a missing
    or corrupt input on the compute nodes (e.g. on a partial mirror copy).

    The run environment sets ``HPCVAL_<PACKAGE NAME>`` (``-`` as ``_``) to the
    prefix: ``wrf-conus-12km-v4`` sets ``HPCVAL_WRF_CONUS_12KM_V4``.
    """

    def install(self, spec, prefix):
        install_tree(".", prefix)
        lines = []
        for top, _dirs, files in os.walk(prefix):
            for name in sorted(files):
                path = os.path.join(top, name)
                rel = os.path.relpath(path, prefix)
                if rel.startswith(".spack") or rel == MANIFEST:
                    continue
                digest = hashlib.sha256()
                with open(path, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 22), b""):
                        digest.update(block)
                lines.append(f"{digest.hexdigest()}  {rel}\n")
        with open(os.path.join(prefix, MANIFEST), "w") as fh:
            fh.writelines(sorted(lines, key=lambda line: line.split(None, 1)[1]))

    def setup_run_environment(self, env):
        env.set("HPCVAL_" + self.name.upper().replace("-", "_"), self.prefix)
