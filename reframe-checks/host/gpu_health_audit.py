"""GPU health audit, beside the host tuning audit: what ``nvidia-smi -q -x``
says about every GPU of the node (ECC mode and error counts, retired or
remapped pages, persistence mode, application and current clocks with their
throttle reasons, PCIe link generation and width against the maximum, driver
and CUDA versions, GPU count and model), compared with the ``gpu.*`` keys of
the site's ``host-expectations.yaml``. Fails naming every GPU (index, bus id)
and setting that differs, with what was found and what was expected. Only on
partitions with the ``gpu`` feature; a node there without ``nvidia-smi``
fails (a GPU partition whose driver is gone is a fault, not a skip).
Logic: :mod:`hpcval.node.gpu_audit`."""

import os
import sys

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpcval.node.gpu_audit import failures, parse_gpu_audit_output
from hpcval.rfm import HpcvalTest
from hpcval.rfm.references import recording
from hpcval.site import Site


@rfm.simple_test
class gpu_health_audit_check(HpcvalTest, rfm.RunOnlyRegressionTest):
    descr = "GPU health (ECC, pages, clocks and reasons, PCIe link, driver) vs expectations"
    valid_systems = ["+gpu"]
    valid_prog_environs = ["+plain"]
    rank_count = 1
    executable = sys.executable
    tags = {"host", "gpu", "audit"}

    #: Expectations file; default: the site's ``host-expectations.yaml``.
    #:
    #: :type: :class:`str` or :obj:`None`
    expectations = variable(str, type(None), value=None, loggable=True)

    @run_after("setup")
    def set_options(self):
        if self.expectations is None:
            path = Site.of_test(self).host_expectations
            # a recording run of a new site audits against nothing: every value is shown
            self.expectations = str(path) if path.exists() or not recording() else os.devnull
        self.executable_opts = ["-m", "hpcval.node.gpu_audit", "--json", "--expect",
                                self.expectations]

    @run_before("run")
    def run_as_one_process(self):
        # the job script runs on the node being audited: no MPI launcher
        self.job.launcher = getlauncher("local")()

    @sanity_function
    def gpus_as_expected(self):
        bad = failures(self.parse_stdout(parse_gpu_audit_output))
        if bad:
            raise SanityError(f"{len(bad)} GPU setting(s) differ from {self.expectations}: "
                              + "; ".join(f.line() for f in bad))
        return True
