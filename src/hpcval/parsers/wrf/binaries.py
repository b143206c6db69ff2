"""Finding a WRF installation (``wrf.exe`` with its case or run directory).
Whether it fits an environment's MPI is the node's question
(:func:`hpcval.node.mpi_abi.mpi_mismatch`), asked by what launches it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["WRF_DIR_VARIABLE", "find_case_dir", "find_run_dir"]

#: Environment variable naming a WRF directory (a case directory such as
#: ``WRF/test/em_quarter_ss`` holding ``wrf.exe``, or the top of a WRF tree).
WRF_DIR_VARIABLE = "HPCVAL_WRF_DIR"


def find_case_dir(case: str, wrf_dir: str | None = None, path: str | None = None) -> Path | None:
    """The directory to run an idealized ``case`` from: it holds ``wrf.exe``,
    ``ideal.exe`` (links are fine) and the case's inputs (``namelist.input``,
    ``input_sounding``...).

    Looked for, in order: ``wrf_dir`` (or ``$HPCVAL_WRF_DIR``) itself or its
    ``test/<case>``; then ``wrf.exe`` on ``PATH`` (``path``) and the
    ``test/<case>`` of the tree it belongs to (``<tree>/main/wrf.exe``, as a
    Spack ``wrf`` installation lays it out). None when there is no such directory.
    """
    candidates: list[Path] = []
    root = wrf_dir if wrf_dir is not None else os.environ.get(WRF_DIR_VARIABLE)
    if root:
        candidates += [Path(root), Path(root) / "test" / case]
    exe = shutil.which("wrf.exe", path=path)
    if exe:
        tree = Path(exe).resolve().parent.parent
        candidates += [tree / "test" / case, Path(exe).parent]
    for cand in candidates:
        if (cand / "wrf.exe").exists() and (cand / "ideal.exe").exists() \
                and (cand / "namelist.input").exists():
            return cand
    return None


def find_run_dir(wrf_dir: str | None = None, path: str | None = None) -> Path | None:
    """WRF's ``run`` directory for real-data cases: ``wrf.exe`` plus the physics
    tables (``LANDUSE.TBL``, ``RRTMG_*_DATA``...) a run links in.

    Looked for in ``wrf_dir`` (or ``$HPCVAL_WRF_DIR``) itself or its ``run/``,
    then beside ``wrf.exe`` on ``PATH`` and in ``<tree>/run`` of the tree it
    belongs to. None when there is none.
    """
    candidates: list[Path] = []
    root = wrf_dir if wrf_dir is not None else os.environ.get(WRF_DIR_VARIABLE)
    if root:
        candidates += [Path(root), Path(root) / "run"]
    exe = shutil.which("wrf.exe", path=path)
    if exe:
        candidates += [Path(exe).parent, Path(exe).resolve().parent.parent / "run"]
    for cand in candidates:
        if (cand / "wrf.exe").exists() and (cand / "LANDUSE.TBL").exists():
            return cand
    return None
