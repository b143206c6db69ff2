"""IOR: file-system write and read-back bandwidth through POSIX and MPI-IO,
one file per rank or one shared file (the output strategies of Software
Cradle's "SMBDirect BMT まとめ" on an established benchmark).

Skipped with a reason where IOR is not installed; how IOR is found, where
its files go and how it is judged: :mod:`hpcval.rfm.ior`.
"""

import reframe as rfm
from reframe.core.builtins import parameter

from hpcval.rfm.ior import LAYOUTS, IorBase


@rfm.simple_test
class ior_check(IorBase):
    descr = "IOR: write/read-back bandwidth, POSIX and MPI-IO, file per process and shared"
    valid_systems = ["*"]
    tags = {"io", "ior", "bandwidth"}

    #: I/O interface (IOR ``-a``).
    api = parameter(["POSIX", "MPIIO"], loggable=True)

    #: One file per rank (``-F``) or one shared file.
    layout = parameter(list(LAYOUTS), loggable=True)
