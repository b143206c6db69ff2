"""Host tuning audit (the host settings of "Getting higher MPI performance for
HPC applications on Google Cloud"): SMT, tuned profile, busy polling, TCP
buffers, transparent huge pages, NUMA balancing, CPU mitigations, SELinux,
firewall tables, locked-memory and open-file limits, NIC driver and interrupt
coalescing, read without root on a compute node and compared with the site's
``host-expectations.yaml`` (beside its references). Fails naming every
setting that differs, with what was found and what was expected; a setting
that cannot be read fails as ``unknown`` unless the site expects ``any``.
Logic: :mod:`hpcval.node.audit`."""

import os
import sys

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpcval.node.audit import failures, parse_audit_output
from hpcval.rfm import HpcvalTest
from hpcval.rfm.references import recording
from hpcval.site import Site


@rfm.simple_test
class host_tuning_audit_check(HpcvalTest, rfm.RunOnlyRegressionTest):
    descr = "Host settings for tightly coupled MPI vs the site's expectations"
    valid_systems = ["*"]
    valid_prog_environs = ["+plain"]
    rank_count = 1
    executable = sys.executable
    tags = {"host", "audit", "tuning"}

    #: Expectations file; default: the site's ``host-expectations.yaml``.
    #:
    #: :type: :class:`str` or :obj:`None`
    expectations = variable(str, type(None), value=None, loggable=True)

    @run_after("setup")
    def set_options(self):
        if self.expectations is None:
            path = Site.of_test(self).host_expectations
            # a recording run of a new site audits against nothing and writes the file
            self.expectations = str(path) if path.exists() or not recording() else os.devnull
        self.executable_opts = ["-m", "hpcval.node.audit", "--json", "--expect", self.expectations]

    @run_before("run")
    def run_as_one_process(self):
        # the job script runs on the node being audited: no MPI launcher
        self.job.launcher = getlauncher("local")()

    @sanity_function
    def settings_as_expected(self):
        bad = failures(self.parse_stdout(parse_audit_output))
        if bad:
            raise SanityError(f"{len(bad)} host setting(s) differ from {self.expectations}: "
                              + "; ".join(f.line() for f in bad))
        return True
