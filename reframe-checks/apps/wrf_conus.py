"""WRF CONUS benchmarks: step time, simulation speed and verified output.

Runs ``wrf.exe`` on NCAR's CONUS benchmark inputs at a set node and rank count.
The inputs come from the hpcval Spack data packages (``wrf-conus-12km-v4``,
``wrf-conus-2p5km-v4``, ``wrf-conus-12km-v3``), whose ``spack load`` sets the
variable named below; they are linked into the stage directory, never copied,
after their sha256 have been checked against the manifest the package wrote
from the checksum-verified tarball. A missing or corrupt input fails the check
with the file's name.

Namelist edits: when the data set holds a restart file the run restarts from
it, as the published benchmark hour does; the run length is ``run_hours``;
history is written once, at the end, and no restart file is written, so that
no output step falls inside the judged steps.

Figures (rules in docs/checks.md, "WRF"): mean and median time per steady step
(first step and I/O steps excluded), simulation speed, and GFLOP/s where a
published factor exists for the data set (the v3.9.1.1 12 km set only).
Sanity: ``SUCCESS COMPLETE WRF``, the expected number of steps, and, where the
data set ships a reference output for the run's end time, a field-by-field
comparison with it (netCDF4) within ``output_tolerance``. How: :mod:`hpcval.rfm.wrf`.
"""

import reframe as rfm
from reframe.core.builtins import parameter

from hpcval.rfm.wrf import WrfConusBase

#: Data sets: variable set by the data package, its Spack name, and the
#: published GFLOP per time step where one exists.
DATA_SETS = {
    "conus12km_v4": {"variable": "HPCVAL_WRF_CONUS_12KM_V4", "package": "wrf-conus-12km-v4",
                     "gflop_per_step": None},
    "conus2p5km_v4": {"variable": "HPCVAL_WRF_CONUS_2P5KM_V4", "package": "wrf-conus-2p5km-v4",
                      "gflop_per_step": None},
    # WRF V3 parallel benchmark page: 0.418 GFLOP per 72 s step of this set.
    "conus12km_v3": {"variable": "HPCVAL_WRF_CONUS_12KM_V3", "package": "wrf-conus-12km-v3",
                     "gflop_per_step": 0.418},
}


@rfm.simple_test
class wrf_conus_check(WrfConusBase):
    descr = "WRF CONUS benchmark: step time, simulation speed, output verified"
    valid_systems = ["*"]
    tags = {"apps", "wrf", "conus"}
    data_sets = DATA_SETS
    #: NCAR CONUS data set (see DATA_SETS).
    data_set = parameter(list(DATA_SETS), loggable=True)
    output_tolerance = 0.02
