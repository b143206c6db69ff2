"""Post-processing read of result files (Software Cradle's "SMBDirect BMT
まとめ": 1 GbE saturates when several readers run at once): one or several readers at
once, per-reader and aggregate read bandwidth, so a file server's link that
saturates under concurrent readers shows. How the proxy reads and drops the
page cache: :class:`hpcval.rfm.cfdio.CfdioReadBase`."""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from hpcval.rfm.cfdio import CfdioReadBase


@rfm.simple_test
class cfdio_read_check(CfdioReadBase):
    descr = "cfdio proxy: concurrent post-processing readers, per-reader and aggregate MB/s"
    valid_systems = ["*"]
    tags = {"io", "cfdio", "read"}

    #: Concurrent readers (one MPI rank each; no case above the partition's CPUs).
    readers = parameter([1, 2, 4, 8], loggable=True)

    @run_after("init")
    def set_readers(self) -> None:
        self.rank_count = self.readers
