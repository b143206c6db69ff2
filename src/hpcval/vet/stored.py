"""The stored vettings (``var/<site>/vet/<id>/vet.json``), read back and checked.

The per-node gate (``hpcval health``) and ``hpcval vet --gate`` judge against
what earlier vettings stored; a file there that is not a vetting of this site
(not JSON, a key missing, a value of the wrong type, another site's) is wrong
input, said before anything is measured (exit 2, naming the file and the key),
never a traceback half-way through nor a vetting silently left out. As root,
each directory and file read must be root's alone (:mod:`hpcval.core.trust`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hpcval.core import trust
from hpcval.core.errors import InputError
from hpcval.vet.sitecfg import VetSite

#: What to do with a file that is not a vetting.
_FIX = ("move it out of the results store (a vetting is written by `hpcval vet` alone) "
        "or run hpcval vet on the partition again")


def _wrong(path: Path, key: str, what: str) -> InputError:
    return InputError(f"{path}: {key}: {what}; {_FIX}; exit 2")


def _number(path: Path, key: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            value):
        raise _wrong(path, key, f"{value!r} is not a finite number")


def _names(path: Path, key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(n, str) and n for n in value):
        raise _wrong(path, key, f"{_short(value)} is not a list of node names")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_vetting(path: Path, data: Any, site: str) -> None:
    """Refuse what the gates would read from ``data`` when it has not the shape
    ``hpcval vet`` stores (:func:`hpcval.vet.run.measure_and_judge`)."""
    if not isinstance(data, dict):
        raise _wrong(path, "(top)", f"a JSON {type(data).__name__}, not an object")
    for key in ("id", "site", "partition"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise _wrong(path, key, "missing" if key not in data else
                         f"{_short(data[key])} is not a name")
    if data["site"] != site:
        raise _wrong(path, "site", f"a vetting of site '{data['site']}', stored under site "
                     f"'{site}'")
    if data["id"] != path.parent.name:
        raise _wrong(path, "id", f"'{data['id']}' is not the directory's name "
                     f"'{path.parent.name}' (a copied or edited file)")
    verdict = data.get("verdict")
    if not isinstance(verdict, dict):
        raise _wrong(path, "verdict", "missing" if verdict is None else "not an object")
    if not isinstance(verdict.get("judged"), bool):
        raise _wrong(path, "verdict.judged", "missing or not true/false")
    nodes = _names(path, "verdict.nodes", verdict.get("nodes"))
    _names(path, "verdict.named_nodes", verdict.get("named_nodes", []))
    table = verdict.get("table")
    if not isinstance(table, dict):
        raise _wrong(path, "verdict.table", "missing" if table is None else "not an object")
    for node, figs in table.items():
        if node not in nodes:
            raise _wrong(path, f"verdict.table.{node}", "a node not in verdict.nodes")
        if not isinstance(figs, dict):
            raise _wrong(path, f"verdict.table.{node}", "not an object")
        for fig, d in figs.items():
            if not isinstance(d, dict) or "value" not in d:
                raise _wrong(path, f"verdict.table.{node}.{fig}", "has no value")
            _number(path, f"verdict.table.{node}.{fig}.value", d["value"])
    pairs = verdict.get("pairs", {})
    if not isinstance(pairs, dict):
        raise _wrong(path, "verdict.pairs", "not an object")
    for key, d in pairs.items():
        if key.count("|") != 1 or not isinstance(d, dict) or "value" not in d:
            raise _wrong(path, f"verdict.pairs.{key}", "not a pair 'a|b' with a value")
        _number(path, f"verdict.pairs.{key}.value", d["value"])


def load(site: VetSite) -> list[dict[str, Any]]:
    """Every judged vetting of the site's partition, oldest first; a file that is
    not a vetting of this site is refused (:class:`InputError`, exit 2)."""
    base = site.var / "vet"
    out = []
    for path in sorted(base.glob("*/vet.json")) if base.is_dir() else []:
        trust.check_paths([path], "a stored vetting the gate trusts")
        try:
            data = json.loads(path.read_text())
        except UnicodeDecodeError:
            raise _wrong(path, "(file)", "not text") from None
        except ValueError as err:
            raise _wrong(path, "(file)", f"not JSON ({err})") from None
        check_vetting(path, data, site.name)
        if data["partition"] == site.slurm_partition and data["verdict"]["judged"]:
            out.append(data)
    return out
