"""Output verification: a run's WRF netCDF output compared field by field
with a reference output of the same model time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpcval.core.errors import ParseError

#: Prognostic 3-D/2-D fields compared by default: winds, potential temperature
#: perturbation, geopotential perturbation, dry-air mass perturbation, vapour.
DEFAULT_FIELDS = ("U", "V", "W", "T", "PH", "MU", "QVAPOR")


@dataclass(frozen=True)
class FieldDifference:
    """How one field of a run differs from the reference output."""

    name: str
    #: rms(run - ref) / rms(ref): the judged measure; 0 for identical fields.
    rms_rel_diff: float
    #: max |run - ref| / max |ref|: reported, not judged (one grid point of a
    #: convective cell may differ much after an hour of chaotic growth).
    max_rel_diff: float
    max_abs_diff: float
    ref_scale: float

    def within(self, tolerance: float) -> bool:
        return self.rms_rel_diff <= tolerance


def _times(ds: Any) -> list[str]:
    """The ``Times`` of a WRF output (``YYYY-MM-DD_hh:mm:ss`` per record)."""
    if "Times" not in ds.variables:
        return []
    return ["".join(c.decode() if isinstance(c, bytes) else str(c) for c in row).strip()
            for row in ds.variables["Times"][:].tolist()]


def compare_output(run_file: str, reference_file: str, fields: tuple[str, ...] = DEFAULT_FIELDS,
                   time_index: int = -1) -> list[FieldDifference]:
    """Field-by-field difference of one time of two WRF netCDF outputs: record
    ``time_index`` of the run, and the reference's record of the same model time
    (``Times``; an error if the reference has no such time).

    The judged measure is the root-mean-square difference divided by the
    root-mean-square of the reference field: a relative difference that stays
    finite where a field crosses zero (winds) and is not dominated by one grid
    point; the largest pointwise difference is reported beside it. Raises :class:`ParseError`
    when a file cannot be read, a field is missing or the shapes differ.
    Needs the ``netCDF4`` package (``pip install hpcval[wrf]``).
    """
    try:
        import netCDF4
        import numpy as np
    except ImportError as err:
        raise ParseError(
            f"output verification needs netCDF4 (pip install netCDF4): {err}") from None
    result: list[FieldDifference] = []
    try:
        run_ds = netCDF4.Dataset(run_file)
    except OSError as err:
        raise ParseError(f"cannot read WRF output {run_file}: {err}") from None
    try:
        try:
            ref_ds = netCDF4.Dataset(reference_file)
        except OSError as err:
            raise ParseError(f"cannot read reference output {reference_file}: {err}") from None
        try:
            ref_index = time_index
            run_times, ref_times = _times(run_ds), _times(ref_ds)
            if run_times and ref_times:
                when = run_times[time_index]
                if when not in ref_times:
                    raise ParseError(
                        f"{reference_file} has no output for {when} (it holds "
                        f"{', '.join(ref_times)}): not a reference for this run")
                ref_index = ref_times.index(when)
            for name in fields:
                for path, ds in ((run_file, run_ds), (reference_file, ref_ds)):
                    if name not in ds.variables:
                        raise ParseError(f"{path}: no field {name!r}")
                run_var = np.asarray(run_ds.variables[name][time_index], dtype="f8")
                ref_var = np.asarray(ref_ds.variables[name][ref_index], dtype="f8")
                if run_var.shape != ref_var.shape:
                    raise ParseError(
                        f"field {name}: shape {run_var.shape} in {run_file} but "
                        f"{ref_var.shape} in {reference_file}"
                    )
                if not np.all(np.isfinite(run_var)):
                    raise ParseError(f"{run_file}: field {name} holds NaN or Inf")
                delta = run_var - ref_var
                diff = float(np.max(np.abs(delta))) if delta.size else 0.0
                scale = float(np.max(np.abs(ref_var))) if ref_var.size else 0.0
                rms_diff = float(np.sqrt(np.mean(delta**2))) if delta.size else 0.0
                rms_ref = float(np.sqrt(np.mean(ref_var**2))) if ref_var.size else 0.0
                result.append(FieldDifference(
                    name, _ratio(rms_diff, rms_ref), _ratio(diff, scale), diff, scale))
        finally:
            ref_ds.close()
    finally:
        run_ds.close()
    return result


def _ratio(diff: float, scale: float) -> float:
    if scale > 0:
        return diff / scale
    return 0.0 if diff == 0 else float("inf")


def check_output(differences: list[FieldDifference], tolerance: float,
                 run_file: str = "run", reference_file: str = "reference") -> None:
    """:class:`ParseError` naming every field whose relative difference exceeds ``tolerance``."""
    bad = [d for d in differences if not d.within(tolerance)]
    if bad:
        detail = "; ".join(
            f"{d.name}: rms rel diff {d.rms_rel_diff:.3g} (max rel {d.max_rel_diff:.3g}, "
            f"max abs {d.max_abs_diff:.3g}, field max {d.ref_scale:.3g})" for d in bad)
        raise ParseError(
            f"{run_file} differs from {reference_file} beyond the tolerance {tolerance:g}: {detail}"
        )
