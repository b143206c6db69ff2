"""Two Spack locks compared as a person reviews them (``hpcval spack lock --diff``).

A lock is one long JSON line, so a text diff shows one changed line. This room reads
both locks as data and says, per concrete spec, what changed: roots added or removed,
and for each package its version, variants, compiler, target and OS, external,
package recipe (``package_hash``), patches and dependencies, and whether its hash
changed and why (which of those changed, or only a dependency). The Spack header
(``_meta`` and ``spack``: its version, and ``type``/``commit``) is compared apart: it
records which Spack wrote the file, not what is built, and is no part of any hash; a
Spack unpacked from a tarball writes ``"type": "release"`` where a git clone of the
same commit writes ``"type": "git", "commit": ...`` (docs/spack.md, section 4).

Pure data: no Spack needed, standard library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval.core.errors import InputError

#: The keys of a lock that are its header, not its specs.
HEADER_KEYS = ("_meta", "spack")
#: Parameters that are compiler flags, not variants.
FLAG_KEYS = ("cflags", "cppflags", "cxxflags", "fflags", "ldflags", "ldlibs")
#: Node keys compared one by one below; any other key is compared whole.
_KNOWN = {"name", "version", "arch", "namespace", "parameters", "package_hash", "patches",
          "dependencies", "external", "annotations", "hash"}
#: The largest file read as a lock (the committed ones are under 200 KB).
MAX_LOCK_BYTES = 64 * 1024 * 1024
#: What a compiler provides (Spack 1.x: a compiler is a build dependency with these virtuals).
_LANGUAGES = {"c", "cxx", "fortran"}


def read_lock_file(path: str | Path, again: str = "give a spack.lock that Spack wrote",
                   ) -> dict[str, Any]:
    """A Spack lock read for comparison: an :class:`InputError` of one line naming the
    file where it is missing, not UTF-8 JSON, or not a Spack lockfile (``_meta``,
    ``roots`` and ``concrete_specs`` as Spack writes them)."""
    from hpcval.spack.environments import _lock_shape

    path = Path(path)
    tail = f"; {again}" if again else ""
    if not path.exists():
        raise InputError(f"{path}: no such file{tail}")
    if not path.is_file():
        raise InputError(f"{path}: not a file{tail}")
    try:
        size = path.stat().st_size
        if size > MAX_LOCK_BYTES:
            raise InputError(f"{path}: {size / 2**20:.0f} MiB, larger than the "
                             f"{MAX_LOCK_BYTES // 2**20} MiB a Spack lock may have here: not "
                             f"a Spack lock{tail}")
        lock = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 (byte offset {err.start}): not a Spack lock"
                         f"{tail}") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not valid JSON ({err}): not a Spack lock{tail}") from None
    except OSError as err:
        raise InputError(f"{path}: cannot be read ({err.strerror}){tail}") from None
    problem = _lock_shape(lock)
    if problem is None:
        meta = lock.get("_meta")
        if not isinstance(meta, dict) or meta.get("file-type") != "spack-lockfile":
            problem = '_meta has no "file-type": "spack-lockfile"'
        elif "roots" not in lock or "concrete_specs" not in lock:
            problem = "no roots or no concrete_specs"
        elif not all(isinstance(n.get("version"), str) for n in lock["concrete_specs"].values()):
            problem = "a concrete spec without a version"
    if problem:
        raise InputError(f"{path}: {problem}: not a Spack lock{tail}")
    return dict(lock)


def _label(node: dict[str, Any], hash_: str) -> str:
    """``name@version/hash7``, with ``^mpi`` where the spec is built against an MPI (a
    package is in a lock once per MPI stack)."""
    mpi = [str(e.get("name")) for e in node.get("dependencies") or []
           if "mpi" in ((e.get("parameters") or {}).get("virtuals") or [])]
    return f"{node.get('name')}@{node.get('version')}{''.join(' ^' + m for m in mpi)}" \
        f"/{hash_[:7]}"


def _variants(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (node.get("parameters") or {}).items() if k not in FLAG_KEYS}


def _flags(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (node.get("parameters") or {}).items() if k in FLAG_KEYS}


def _arch(node: dict[str, Any]) -> tuple[str, str, str]:
    arch = node.get("arch") or {}
    target = arch.get("target", "")
    name = target.get("name", "") if isinstance(target, dict) else str(target)
    return str(arch.get("platform", "")), str(arch.get("platform_os", "")), str(name)


def _edges(node: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(e.get("name")): e for e in node.get("dependencies") or []}


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_show(v) for v in value) or "(none)"
    if value is None:
        return "(none)"
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else str(value)


@dataclass
class NodeChange:
    """One concrete spec present in both locks whose content differs."""

    label: str                    #: name@version/hash of the spec before
    new_hash: str
    hash_changed: bool
    aspects: list[str] = field(default_factory=list)    #: what changed in the spec itself
    lines: list[str] = field(default_factory=list)      #: one per change, to print
    through: list[str] = field(default_factory=list)    #: dependencies whose hash changed

    @property
    def at_source(self) -> bool:
        """Changed itself, not only because a dependency did."""
        return bool(self.aspects)


@dataclass
class LockDiff:
    """What differs between two locks: header apart, then the specs."""

    header: list[str] = field(default_factory=list)
    roots_added: list[str] = field(default_factory=list)
    roots_removed: list[str] = field(default_factory=list)
    roots_rehashed: list[str] = field(default_factory=list)
    roots_reordered: bool = False
    changed: list[NodeChange] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def spec_changes(self) -> int:
        """Every difference that is not the header: 0 when the two locks build the same."""
        return (len(self.roots_added) + len(self.roots_removed) + len(self.roots_rehashed)
                + int(self.roots_reordered) + len(self.changed) + len(self.added)
                + len(self.removed))

    def lines(self) -> list[str]:
        """The review, one finding a line: header first (marked as such), then roots,
        specs changed at their source, specs changed only through a dependency,
        specs added and removed, and a closing count."""
        out = [f"header (not a spec change, no part of any hash): {h}" for h in self.header]
        out += [f"root added: {r}" for r in self.roots_added]
        out += [f"root removed: {r}" for r in self.roots_removed]
        out += [f"root re-concretized: {r}" for r in self.roots_rehashed]
        if self.roots_reordered:
            out.append("roots: the same roots in another order")
        for change in self.changed:
            if change.at_source:
                out.append(f"changed: {change.label}: " + "; ".join(change.lines))
        for change in self.changed:
            if not change.at_source:
                out.append(f"changed through dependencies: {change.label}: "
                           + "; ".join(change.lines))
        out += [f"spec added: {a}" for a in self.added]
        out += [f"spec removed: {r}" for r in self.removed]
        source = sum(1 for c in self.changed if c.at_source)
        out.append(f"{self.spec_changes} spec changes: {len(self.roots_added)} roots added, "
                   f"{len(self.roots_removed)} removed, {len(self.roots_rehashed)} "
                   f"re-concretized; {source} specs changed themselves, "
                   f"{len(self.changed) - source} only through dependencies, "
                   f"{len(self.added)} added, {len(self.removed)} removed"
                   + ("; the header differs (above)" if self.header else ""))
        return out


def _header(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    found = []
    for key in HEADER_KEYS:
        before, after = old.get(key) or {}, new.get(key) or {}
        if not isinstance(before, dict) or not isinstance(after, dict):
            if before != after:
                found.append(f"{key}: {_show(before)} -> {_show(after)}")
            continue
        for sub in sorted(set(before) | set(after)):
            if before.get(sub) != after.get(sub):
                found.append(f"{key} {sub}: {_show(before.get(sub))} -> "
                             f"{_show(after.get(sub))}")
    for key in sorted(set(old) | set(new)):
        if key not in (*HEADER_KEYS, "roots", "concrete_specs") and old.get(key) != new.get(key):
            found.append(f"{key}: {_show(old.get(key))} -> {_show(new.get(key))}")
    return found


def _dependents(specs: dict[str, dict[str, Any]]) -> dict[str, set[str]]:
    """Hash -> names of the specs that depend on it."""
    found: dict[str, set[str]] = {h: set() for h in specs}
    for node in specs.values():
        for edge in node.get("dependencies") or []:
            found.setdefault(str(edge.get("hash")), set()).add(str(node.get("name")))
    return found


def _distance(a: dict[str, Any], b: dict[str, Any], up_a: set[str], up_b: set[str]) -> int:
    """How unlike two specs of one name are: used to pair the several specs one package
    has in a lock (IOR against each MPI) when their hashes changed."""
    va, vb = _variants(a), _variants(b)
    return (int(a.get("version") != b.get("version"))
            + sum(va.get(k) != vb.get(k) for k in set(va) | set(vb))
            + len(set(_edges(a)) ^ set(_edges(b))) * 2 + len(up_a ^ up_b) * 2
            + int(_arch(a) != _arch(b)))


def _pairs(old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]],
           ) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """(old hash, new hash) of the same spec in both locks; hashes only in old; only in new.
    The same hash pairs first, then, per package name, the most alike specs."""
    pairs = [(h, h) for h in old if h in new]
    up_old, up_new = _dependents(old), _dependents(new)
    left_old = [h for h in old if h not in new]
    left_new = [h for h in new if h not in old]
    for name in sorted({str(old[h].get("name")) for h in left_old}):
        olds = [h for h in left_old if old[h].get("name") == name]
        news = [h for h in left_new if new[h].get("name") == name]
        ranked = sorted((_distance(old[o], new[n], up_old.get(o, set()), up_new.get(n, set())),
                         i, j, o, n) for i, o in enumerate(olds) for j, n in enumerate(news))
        used_old: set[str] = set()
        used_new: set[str] = set()
        for _, _, _, o, n in ranked:
            if o not in used_old and n not in used_new:
                pairs.append((o, n))
                used_old.add(o)
                used_new.add(n)
    paired_old = {o for o, _ in pairs}
    paired_new = {n for _, n in pairs}
    return (pairs, [h for h in old if h not in paired_old],
            [h for h in new if h not in paired_new])


def _compilers(node: dict[str, Any], specs: dict[str, dict[str, Any]]) -> str:
    found = []
    for edge in node.get("dependencies") or []:
        virtuals = set((edge.get("parameters") or {}).get("virtuals") or [])
        if virtuals & _LANGUAGES:
            dep = specs.get(str(edge.get("hash"))) or {}
            found.append(f"{dep.get('name', edge.get('name'))}@{dep.get('version', '?')}"
                         f" ({','.join(sorted(virtuals & _LANGUAGES))})")
    return " ".join(sorted(found)) or "(none)"


def _compare(o: str, n: str, old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]],
             renamed: dict[str, str]) -> NodeChange | None:
    """What differs between spec *o* of the old lock and *n* of the new one; *renamed*
    maps every old hash to the hash of its pair in the new lock."""
    a, b = old[o], new[n]
    change = NodeChange(label=_label(a, o), new_hash=n, hash_changed=o != n)
    if a.get("version") != b.get("version"):
        change.aspects.append("version")
        change.lines.append(f"version {a.get('version')} -> {b.get('version')}")
    va, vb = _variants(a), _variants(b)
    moved = [k for k in sorted(set(va) | set(vb)) if va.get(k) != vb.get(k)]
    if moved:
        change.aspects.append("variants")
        change.lines += [f"variant {k}: {_show(va.get(k))} -> {_show(vb.get(k))}"
                         for k in moved]
    fa, fb = _flags(a), _flags(b)
    flags = [k for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]
    if flags:
        change.aspects.append("flags")
        change.lines += [f"{k}: {_show(fa.get(k))} -> {_show(fb.get(k))}" for k in flags]
    ca, cb = _compilers(a, old), _compilers(b, new)
    if ca != cb:
        change.aspects.append("compiler")
        change.lines.append(f"compiler {ca} -> {cb}")
    for what, i in (("platform", 0), ("os", 1), ("target", 2)):
        if _arch(a)[i] != _arch(b)[i]:
            change.aspects.append(what)
            change.lines.append(f"{what} {_arch(a)[i]} -> {_arch(b)[i]}")
    if _arch(a) == _arch(b) and a.get("arch") != b.get("arch"):
        change.aspects.append("target")
        change.lines.append("target features (same target name) differ")
    for key, what in (("namespace", "namespace"), ("package_hash", "package recipe"),
                      ("patches", "patches"), ("external", "external")):
        if a.get(key) != b.get(key):
            change.aspects.append(what)
            change.lines.append(f"{what} {_show(a.get(key))} -> {_show(b.get(key))}")
    for key in sorted((set(a) | set(b)) - _KNOWN):
        if a.get(key) != b.get(key):
            change.aspects.append(key)
            change.lines.append(f"{key} {_show(a.get(key))} -> {_show(b.get(key))}")
    ea, eb = _edges(a), _edges(b)
    for name in sorted(set(ea) - set(eb)):
        change.aspects.append("dependencies")
        change.lines.append(f"dependency {name} removed")
    for name in sorted(set(eb) - set(ea)):
        change.aspects.append("dependencies")
        change.lines.append(f"dependency {name} added")
    for name in sorted(set(ea) & set(eb)):
        pa, pb = ea[name].get("parameters") or {}, eb[name].get("parameters") or {}
        if pa != pb:
            change.aspects.append("dependencies")
            change.lines.append(f"dependency {name}: {_show(pa)} -> {_show(pb)}")
        old_dep, new_dep = str(ea[name].get("hash")), str(eb[name].get("hash"))
        if old_dep != new_dep:
            change.through.append(name)
            if renamed.get(old_dep) != new_dep:
                change.aspects.append("dependencies")
                change.lines.append(f"dependency {name}: now another spec "
                                    f"({_label(new.get(new_dep, {}), new_dep)})")
    for key in ("annotations",):
        if a.get(key) != b.get(key):
            change.aspects.append(key)
            change.lines.append(f"{key} {_show(a.get(key))} -> {_show(b.get(key))}")
    if change.through:
        change.lines.append(f"through dependencies {', '.join(change.through)}")
    if o != n:
        why = ", ".join(dict.fromkeys(change.aspects)) or (
            "dependencies " + ", ".join(change.through) if change.through else "")
        change.lines.append(f"hash {o} -> {n}"
                            + (f" ({why})" if why else
                               " (no field hpcval compares differs)"))
    elif change.lines:
        change.lines.append(f"hash {o} unchanged although the spec differs: a lock "
                            "edited by hand, not one Spack wrote")
    return change if change.lines else None


def diff_locks(old: dict[str, Any], new: dict[str, Any]) -> LockDiff:
    """What differs between two locks (read by :func:`read_lock_file`)."""
    found = LockDiff(header=_header(old, new))
    specs_old, specs_new = old["concrete_specs"], new["concrete_specs"]
    roots_old = [(str(r.get("spec")), str(r["hash"])) for r in old["roots"]]
    roots_new = [(str(r.get("spec")), str(r["hash"])) for r in new["roots"]]
    by_spec_old, by_spec_new = dict(roots_old), dict(roots_new)
    found.roots_added = [f"{s} ({_label(specs_new[h], h)})" for s, h in roots_new
                         if s not in by_spec_old]
    found.roots_removed = [f"{s} ({_label(specs_old[h], h)})" for s, h in roots_old
                           if s not in by_spec_new]
    found.roots_rehashed = [f"{s}: {by_spec_old[s]} -> {h}" for s, h in roots_new
                            if s in by_spec_old and by_spec_old[s] != h]
    kept_old = [s for s, _ in roots_old if s in by_spec_new]
    kept_new = [s for s, _ in roots_new if s in by_spec_old]
    found.roots_reordered = kept_old != kept_new
    pairs, removed, added = _pairs(specs_old, specs_new)
    renamed = dict(pairs)
    for o, n in pairs:
        change = _compare(o, n, specs_old, specs_new, renamed)
        if change is not None:
            found.changed.append(change)
    found.changed.sort(key=lambda c: c.label)
    found.added = sorted(_label(specs_new[h], h) for h in added)
    found.removed = sorted(_label(specs_old[h], h) for h in removed)
    return found
