"""The site's vetting rules: ``site-configs/<site>/vet-rules.yaml`` (optional).

Declarative, no code. Three sections, each optional::

    codes:                    # per finding code (docs/vet.md, "Finding codes")
      HC-IB-SYMBOL: {severity: off, threshold: 100}   # per hour
      HC-UNI-SOFTWARE: {severity: ignore}
    allow:                    # fingerprint values a partition may mix
      cpu:
        model: ["Intel(R) Xeon(R) Platinum 8480+", "Intel(R) Xeon(R) Platinum 8470"]
    ignore_keys:              # fingerprint keys never compared
      kernel: [cmdline]

``severity`` is ``off`` (drain), ``suspect`` (named, not drained), ``unknown``
or ``ignore`` (recorded in the notes, never named). ``threshold`` is the
counter rate per hour since the node's previous reading above which a
counter finding is made (0: any rise), and for ``HC-ECC-CE`` also ``factor``:
the rate must exceed ``factor`` times the partition's median rate too.

A file that is not of this shape is wrong input: one line naming the file and
the key, exit 2 (docs/errors.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval.core.errors import SiteError
from hpcval.core.yamlio import load_yaml_bounded, read_bounded
from hpcval.vet.findings import CATEGORIES, CODES, SEVERITIES, Finding

FILE = "vet-rules.yaml"

#: counter code -> default threshold (rate per hour since the previous reading)
THRESHOLDS: dict[str, float] = {
    "HC-ECC-UE": 0.0, "HC-ECC-CE": 10.0, "HC-IB-SYMBOL": 10.0, "HC-IB-RECOVERY": 0.0,
    "HC-IB-DOWNED": 0.0, "HC-IB-RCVERR": 10.0, "HC-NIC-ERR": 10.0, "HC-MCE": 0.0,
}
#: corrected ECC: named only above this many times the partition's median rate too
CE_FACTOR = 10.0


@dataclass
class Rules:
    severity: dict[str, str] = field(default_factory=dict)
    threshold: dict[str, float] = field(default_factory=dict)
    ce_factor: float = CE_FACTOR
    #: category -> key -> allowed values
    allow: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    ignore_keys: dict[str, set[str]] = field(default_factory=dict)
    source: str = "defaults"

    def limit(self, code: str) -> float:
        return self.threshold.get(code, THRESHOLDS.get(code, 0.0))

    def apply(self, findings: list[Finding]) -> tuple[list[Finding], list[str]]:
        """The findings with the site's severities; those set to ``ignore`` become
        notes."""
        kept, notes = [], []
        for f in findings:
            sev = self.severity.get(f.code)
            if sev == "ignore":
                notes.append(f"{f.node or 'partition'}: [{f.code}] ignored by {self.source}: "
                             f"{f.text}")
                continue
            if sev:
                f.severity = sev
            kept.append(f)
        return kept, notes


def _bad(path: Path, key: str, what: str) -> SiteError:
    return SiteError(f"{path}: {key}: {what}; fix the file or remove it (the defaults "
                     "apply without it); exit 2")


def parse(data: Any, path: Path) -> Rules:
    rules = Rules(source=path.name)
    if data is None:
        return rules
    if not isinstance(data, dict):
        raise _bad(path, "(top)", "must be a mapping with codes, allow, ignore_keys")
    for key in data:
        if key not in ("codes", "allow", "ignore_keys"):
            raise _bad(path, str(key), "unknown section (known: codes, allow, ignore_keys)")
    codes = data.get("codes") or {}
    if not isinstance(codes, dict):
        raise _bad(path, "codes", "must map finding codes to {severity, threshold}")
    for code, spec in codes.items():
        where = f"codes.{code}"
        if code not in CODES:
            raise _bad(path, where, "not a finding code (docs/vet.md lists them)")
        if not isinstance(spec, dict):
            raise _bad(path, where, "must be a mapping with severity, threshold or factor")
        for k, v in spec.items():
            if k == "severity":
                if v is False:  # YAML 1.1 reads an unquoted off as false
                    v = "off"
                if v not in (*SEVERITIES, "ignore"):
                    raise _bad(path, f"{where}.severity", f"{v!r} is not one of "
                               "off, suspect, unknown, ignore")
                rules.severity[code] = v
            elif k in ("threshold", "factor"):
                if code not in THRESHOLDS:
                    raise _bad(path, f"{where}.{k}", "only error-counter codes take one "
                               f"({', '.join(THRESHOLDS)})")
                if k == "factor" and code != "HC-ECC-CE":
                    raise _bad(path, f"{where}.factor", "only HC-ECC-CE takes a factor")
                if (isinstance(v, bool) or not isinstance(v, (int, float))
                        or not math.isfinite(v) or v < 0):
                    raise _bad(path, f"{where}.{k}", f"{v!r} is not a number >= 0")
                if k == "threshold":
                    rules.threshold[code] = float(v)
                else:
                    rules.ce_factor = float(v)
            else:
                raise _bad(path, f"{where}.{k}", "unknown key (known: severity, threshold, "
                           "factor)")
    allow = data.get("allow") or {}
    if not isinstance(allow, dict):
        raise _bad(path, "allow", "must map categories to {key: [values]}")
    for cat, keys in allow.items():
        if cat not in CATEGORIES:
            raise _bad(path, f"allow.{cat}", f"not a category (known: {', '.join(CATEGORIES)})")
        if not isinstance(keys, dict):
            raise _bad(path, f"allow.{cat}", "must map fingerprint keys to lists of values")
        for k, vals in keys.items():
            if not isinstance(vals, list) or not vals or not all(
                    isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in vals):
                raise _bad(path, f"allow.{cat}.{k}", "must be a non-empty list of values")
            rules.allow.setdefault(cat, {})[str(k)] = {str(v) for v in vals}
    ignore = data.get("ignore_keys") or {}
    if not isinstance(ignore, dict):
        raise _bad(path, "ignore_keys", "must map categories to lists of keys")
    for cat, keys in ignore.items():
        if cat not in CATEGORIES:
            raise _bad(path, f"ignore_keys.{cat}",
                       f"not a category (known: {', '.join(CATEGORIES)})")
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise _bad(path, f"ignore_keys.{cat}", "must be a list of key names")
        rules.ignore_keys[cat] = set(keys)
    return rules


def load(site_dir: Path) -> Rules:
    """The site's rules (the defaults where it has no ``vet-rules.yaml``)."""
    path = site_dir / FILE
    if not path.exists():
        return Rules()

    def error(file: str, where: str, reason: str) -> SiteError:
        return SiteError(f"{file}: {where + ': ' if where else ''}{reason}; exit 2")

    try:
        raw = read_bounded(path, error)
    except OSError as err:
        raise SiteError(f"{path}: cannot read: {err.strerror}; exit 2") from None
    return parse(load_yaml_bounded(raw, str(path), error), path)
