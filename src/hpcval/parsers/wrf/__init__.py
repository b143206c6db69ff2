"""WRF: run logs and the figure of merit, ``namelist.input``, output
verification, input manifests and finding an installation.

One module per concern; everything is re-exported here, so checks and tests
use ``from hpcval.parsers import wrf`` and ``wrf.<name>``:

* :mod:`~hpcval.parsers.wrf.log`: ``rsl.error.0000`` timers, completion and
  failures, step-time figures (the rules are in that module's documentation);
* :mod:`~hpcval.parsers.wrf.namelist`: reading and editing ``namelist.input``,
  run length (``run_*`` or ``start_*``/``end_*`` dates) and expected steps;
* :mod:`~hpcval.parsers.wrf.output`: netCDF output compared with a reference;
* :mod:`~hpcval.parsers.wrf.inputs`: sha256 manifests of data packages;
* :mod:`~hpcval.parsers.wrf.binaries`: finding ``wrf.exe``.
"""

from hpcval.parsers.wrf.binaries import WRF_DIR_VARIABLE, find_case_dir, find_run_dir
from hpcval.parsers.wrf.inputs import MANIFEST, read_manifest, sha256_file, verify_inputs
from hpcval.parsers.wrf.log import (
    WrfFigures,
    WrfLog,
    WrfStep,
    WrfWrite,
    check_complete,
    figures,
    format_model_time,
    model_seconds,
    parse_wrf_log,
)
from hpcval.parsers.wrf.namelist import (
    edit_namelist,
    end_time,
    expected_steps,
    model_step,
    namelist_value,
    run_seconds,
    start_time,
)
from hpcval.parsers.wrf.output import (
    DEFAULT_FIELDS,
    FieldDifference,
    check_output,
    compare_output,
)

__all__ = [
    "DEFAULT_FIELDS", "MANIFEST", "WRF_DIR_VARIABLE", "FieldDifference",
    "WrfFigures", "WrfLog", "WrfStep", "WrfWrite", "check_complete", "check_output",
    "compare_output", "edit_namelist", "end_time", "expected_steps", "figures",
    "find_case_dir", "find_run_dir", "format_model_time",
    "model_seconds", "model_step", "namelist_value", "parse_wrf_log",
    "read_manifest", "run_seconds", "sha256_file", "start_time", "verify_inputs",
]
