"""WRF idealized case: halo exchange and step time without external data.

Runs ``ideal.exe`` then ``wrf.exe`` of an idealized case (``em_quarter_ss`` by
default: a 3-D supercell, 41x41x40 points, 12 s step; 30 simulated minutes are
150 steps) built with the matching ``compile_type``. It needs no input data, so
sites and the lab can exercise WRF's halo exchange in minutes. The figures
follow the same rules as the CONUS check (docs/checks.md, "WRF"): the first step
and the steps that write history or restart output are excluded; mean and median
step time and simulation speed over the rest.

WRF is found through the environment: ``$HPCVAL_WRF_DIR`` (the case directory,
e.g. ``WRF/test/em_quarter_ss``, or the top of the WRF tree), the
environment's ``extras.wrf_dir``, or ``wrf.exe`` on ``PATH``. Where there is no
WRF, or it was built against another MPI than the environment's, the check is
skipped with the reason. The last history output is compared field by field
with ``reference_output`` (or the partition's ``extras.wrf_reference_outputs``,
a mapping case -> file) where one is configured (docs/checks.md, "Output
verification"). How: :mod:`hpcval.rfm.wrf`.
"""

import reframe as rfm

from hpcval.rfm.wrf import WrfIdealizedBase


@rfm.simple_test
class wrf_idealized_check(WrfIdealizedBase):
    descr = "WRF idealized case (no input data): step time and simulation speed"
    valid_systems = ["*"]
    rank_count = 2
    time_limit = "20m"
    tags = {"apps", "wrf", "halo"}
