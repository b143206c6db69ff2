"""Intel MPI tuned collectives are not slower than the default (the tuning
of "Getting higher MPI performance for HPC applications on Google Cloud").

Runs IMB with Intel MPI's default algorithm choice and with the site's tuned
``I_MPI_ADJUST_<COLLECTIVE>`` setting (``mpi-tuning.yaml`` beside the site's
references, written by ``hpcval tune collectives --write``), alternating the
two ``samples`` times in one job. Judged figure: the tuned run's total time
over all sizes in % of the default run (median of the pairs). Skipped where
the site has no tuned setting for the collective or it was tuned at another
rank count; a malformed file fails. Logic: :mod:`hpcval.node.tuning`,
:class:`hpcval.rfm.imb.ImbLabelledRunsBase`.
"""


import reframe as rfm
from reframe.core.builtins import run_after, sanity_function, variable
from reframe.core.exceptions import ReframeError, SanityError

from hpcval.core.errors import SiteError
from hpcval.core.figures import Figure
from hpcval.node import tuning
from hpcval.rfm.imb import ImbLabelledRunsBase
from hpcval.site import Site


@rfm.simple_test
class imb_tuned_collectives_check(ImbLabelledRunsBase):
    descr = "Intel MPI tuned collective setting vs the default choice"
    valid_systems = ["*"]
    repetitions = 60
    tags = {"mpi", "impi", "tuning", "collectives"}
    figures = (Figure("tuned_vs_default", "%", better="lower"),)

    #: The tuned setting in use (from the site's ``mpi-tuning.yaml``).
    #:
    #: :type: :class:`str`
    tuned_setting = variable(str, value="", loggable=True)

    @run_after("setup")
    def load_tuned_setting(self):
        site = Site.of_test(self)
        path = site.tuning
        try:
            entry = (site.load_tuning() or {}).get(self.collective)
        except SiteError as err:
            raise ReframeError(str(err)) from None  # a broken file fails, never skips
        self.skip_if(entry is None, f"{path}: no tuned {self.collective} setting for this "
                     "site (run the sweep, then `hpcval tune collectives --write`)")
        self.skip_if(entry.get("ranks") != self.num_tasks,
                     f"{path}: {self.collective} was tuned at {entry.get('ranks')} ranks, this "
                     f"run has {self.num_tasks}")
        self.tuned_setting = entry["setting"]

    def labelled_runs(self, launch):
        var = tuning.variable_name(self.collective)
        tuned = [f'echo "{tuning.MARKER} 1"', f'{var}="{self.tuned_setting}" {launch}']
        default = [f'echo "{tuning.MARKER} 0"', launch]
        return tuned + (default + tuned) * (self.samples - 1)

    def measure(self):
        return {"tuned_vs_default": tuning.tuned_vs_default_pct(self.labelled())}

    @sanity_function
    def every_pair_measured(self):
        ratios = self.figure_samples()["tuned_vs_default"]
        if len(ratios) != self.samples:
            raise SanityError(f"{len(ratios)} default/tuned pair(s), {self.samples} expected")
        return True
