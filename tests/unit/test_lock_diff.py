"""Two Spack locks compared spec by spec (:mod:`hpcval.spack.lockdiff`), on the committed
locks of the project's environments: against themselves, against a copy with one
package changed (by hand, and as Spack would write it: new hashes up to the roots),
and against a copy whose only difference is the Spack header. No Spack needed."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from hpcval import spack
from hpcval.core.errors import InputError
from hpcval.core.paths import project_root

ROOT = project_root()
COMMITTED = sorted(p.parent.name for p in (ROOT / "environments").glob("*/spack.lock")
                   if spack.lock_is_made_here(p.parent) is False)


def _lock(env: str) -> dict[str, Any]:
    return spack.read_lock_file(ROOT / "environments" / env / "spack.lock")


def _one(lock: dict[str, Any], name: str) -> tuple[str, dict[str, Any]]:
    found = [(h, n) for h, n in lock["concrete_specs"].items() if n["name"] == name]
    assert len(found) == 1, f"{name}: {len(found)} specs"
    return found[0]


def _rehash(lock: dict[str, Any], *changed: str) -> dict[str, str]:
    """Give *changed* and every spec depending on them, up to the roots, a new hash, as
    Spack does when a spec changes (a hash covers the dependencies' hashes); returns
    old -> new hash."""
    specs = lock["concrete_specs"]
    dependents: dict[str, set[str]] = {}
    for h, node in specs.items():
        for edge in node.get("dependencies", []):
            dependents.setdefault(edge["hash"], set()).add(h)
    todo, renamed = list(changed), {}
    while todo:
        h = todo.pop()
        if h not in renamed:
            renamed[h] = "z" + h[:-1]
            todo.extend(dependents.get(h, ()))
    lock["concrete_specs"] = {renamed.get(h, h): n for h, n in specs.items()}
    for h, node in lock["concrete_specs"].items():
        node["hash"] = h
        for edge in node.get("dependencies", []):
            edge["hash"] = renamed.get(edge["hash"], edge["hash"])
    for root in lock["roots"]:
        root["hash"] = renamed.get(root["hash"], root["hash"])
    return renamed


def test_the_committed_locks_are_there() -> None:
    assert {"onprem-ib", "gcp-c2-impi"} <= set(COMMITTED)


@pytest.mark.parametrize("env", COMMITTED)
def test_a_committed_lock_against_itself_has_no_change(env: str) -> None:
    found = spack.diff_locks(_lock(env), _lock(env))
    assert found.spec_changes == 0
    assert found.header == []
    assert found.lines() == [found.lines()[-1]]
    assert found.lines()[-1].startswith("0 spec changes")


@pytest.mark.parametrize("env", COMMITTED)
def test_only_the_header_changed_is_no_spec_change(env: str) -> None:
    """What a Spack unpacked from a tarball of the pinned commit writes: type release,
    no commit; the specs and their hashes are the same."""
    new = _lock(env)
    assert new["spack"]["type"] == "git" and len(new["spack"]["commit"]) == 40
    new["spack"] = {"version": new["spack"]["version"], "type": "release"}
    found = spack.diff_locks(_lock(env), new)
    assert found.spec_changes == 0
    assert sorted(found.header) == [
        f"spack commit: {_lock(env)['spack']['commit']} -> (none)",
        "spack type: git -> release"]
    lines = found.lines()
    assert all(ln.startswith("header (not a spec change") for ln in lines[:-1])
    assert lines[-1].endswith("the header differs (above)")


def test_a_version_edited_by_hand_is_named_and_nothing_else() -> None:
    new = _lock("onprem-ib")
    hash_, node = _one(new, "hwloc")
    node["version"] = "2.12.0"
    found = spack.diff_locks(_lock("onprem-ib"), new)
    assert found.spec_changes == 1
    assert [c.label for c in found.changed] == [f"hwloc@2.13.0/{hash_[:7]}"]
    change = found.changed[0]
    assert change.aspects == ["version"] and change.through == []
    assert change.lines[0] == "version 2.13.0 -> 2.12.0"
    assert "edited by hand" in change.lines[-1]
    assert not (found.added or found.removed or found.roots_added or found.roots_removed)


def test_a_variant_edited_by_hand_is_named_and_nothing_else() -> None:
    new = _lock("gcp-c2-impi")
    hash_, node = _one(new, "openmpi")
    before = node["parameters"]["fabrics"]
    node["parameters"]["fabrics"] = [*before, "ucx"]
    found = spack.diff_locks(_lock("gcp-c2-impi"), new)
    assert found.spec_changes == 1
    [change] = found.changed
    assert change.label.startswith("openmpi@5.0.8/") and change.aspects == ["variants"]
    assert change.lines[0] == f"variant fabrics: {','.join(before)} -> {','.join(before)},ucx"


def test_a_version_as_spack_writes_it_names_the_cause_and_each_dependent() -> None:
    """hwloc at another version: hwloc changed itself (its hash because of its version);
    every spec above it only through its dependencies, each naming which."""
    old, new = _lock("onprem-ib"), _lock("onprem-ib")
    hash_, node = _one(new, "hwloc")
    node["version"] = "2.12.0"
    renamed = _rehash(new, hash_)
    found = spack.diff_locks(old, new)
    source = [c for c in found.changed if c.at_source]
    assert [c.label for c in source] == [f"hwloc@2.13.0/{hash_[:7]}"]
    assert source[0].lines[-1] == f"hash {hash_} -> {renamed[hash_]} (version)"
    through = [c for c in found.changed if not c.at_source]
    assert len(through) == len(renamed) - 1 > 0
    for change in through:
        assert change.hash_changed and change.through
        assert change.lines[-1].endswith(f"(dependencies {', '.join(change.through)})")
    openmpi = next(c for c in through if c.label.startswith("openmpi@"))
    assert "hwloc" in openmpi.through
    rehashed_roots = [r for r in old["roots"] if r["hash"] in renamed]
    assert len(found.roots_rehashed) == len(rehashed_roots) > 0
    assert not (found.added or found.removed or found.roots_added or found.roots_removed)
    assert found.spec_changes == len(renamed) + len(rehashed_roots)


def test_several_specs_of_one_package_pair_by_their_mpi() -> None:
    """IOR is in the lock once per MPI: with every hash new (a changed compiler-wrapper
    under all of them), each IOR pairs with the IOR built against the same MPI."""
    old, new = _lock("onprem-ib"), _lock("onprem-ib")
    hash_, _ = _one(new, "compiler-wrapper")
    _one(new, "compiler-wrapper")[1]["package_hash"] = "changed===="
    _rehash(new, hash_)
    found = spack.diff_locks(old, new)
    iors = [c for c in found.changed if c.label.startswith("ior@")]
    assert len(iors) == 3
    for change in iors:
        assert change.aspects == [] and "compiler-wrapper" in change.through
    wrapper = next(c for c in found.changed if c.label.startswith("compiler-wrapper@"))
    assert wrapper.aspects == ["package recipe"]


def test_a_root_added_and_a_spec_removed() -> None:
    old, new = _lock("onprem-ib"), _lock("onprem-ib")
    stream_hash = next(r["hash"] for r in new["roots"] if r["spec"].startswith("stream"))
    new["roots"] = [r for r in new["roots"] if r["hash"] != stream_hash]
    del new["concrete_specs"][stream_hash]
    found = spack.diff_locks(old, new)
    assert len(found.roots_removed) == 1 and found.roots_removed[0].startswith("stream+openmp")
    assert found.removed == [f"stream@5.10/{stream_hash[:7]}"]
    back = spack.diff_locks(new, old)
    assert len(back.roots_added) == 1 and back.added == found.removed


def test_a_compiler_change_is_named_as_such() -> None:
    old = _lock("onprem-ib")
    new = copy.deepcopy(old)
    gcc_hash, gcc = _one(new, "gcc")
    gcc["version"] = "12.2.0"
    found = spack.diff_locks(old, new)
    ior = next(c for c in found.changed if c.label.startswith("ior@"))
    assert ior.aspects == ["compiler"]
    assert ior.lines[0] == "compiler gcc@11.4.1 (c) -> gcc@12.2.0 (c)"


@pytest.mark.parametrize(("content", "says"), [
    ("", "not valid JSON"),
    ("[]", "not an object"),
    ("{}", '"file-type": "spack-lockfile"'),
    ('{"_meta": {"file-type": "spack-lockfile"}, "roots": [], "concrete_specs": '
     '{"a": {"name": "x"}}}', "without a version"),
])
def test_a_file_that_is_no_lock_is_named(tmp_path: Path, content: str, says: str) -> None:
    path = tmp_path / "new.lock"
    path.write_text(content)
    with pytest.raises(InputError) as err:
        spack.read_lock_file(path)
    assert str(err.value).startswith(f"{path}: ") and says in str(err.value)


def test_the_lock_shape_is_what_spack_wrote(tmp_path: Path) -> None:
    """A lock pretty-printed (by a person reading it) is the same lock."""
    path = tmp_path / "pretty.lock"
    path.write_text(json.dumps(_lock("onprem-ib"), indent=2))
    assert spack.diff_locks(_lock("onprem-ib"), spack.read_lock_file(path)).spec_changes == 0


def _earlier_lock(env: str) -> dict[str, Any] | None:
    """The committed lock of *env* from before hpcval-cfdio was pinned by version
    (``@main``, a commit variant), read from git history; None without that history."""
    import subprocess

    path = f"environments/{env}/spack.lock"
    log = subprocess.run(["git", "log", "--format=%H", "--", path], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    for commit in log.stdout.split():
        shown = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT,
                               capture_output=True, check=False)
        if shown.returncode != 0:
            continue
        lock = json.loads(shown.stdout)
        if any(n["name"] == "hpcval-cfdio" and n["version"] == "main"
               for n in lock["concrete_specs"].values()):
            return dict(lock)
    return None


@pytest.mark.parametrize("env", COMMITTED)
def test_a_real_relock_from_history_names_only_what_changed(env: str) -> None:
    """Two locks Spack wrote, the earlier one from git history: the re-lock for
    hpcval-cfdio@1.0.0 in place of @main changed those specs (version, the commit variant
    and the package recipe) and the roots naming them, nothing else."""
    earlier = _earlier_lock(env)
    if earlier is None:
        pytest.skip(f"no earlier environments/{env}/spack.lock in this clone's git history "
                    "(a shallow clone)")
    found = spack.diff_locks(earlier, _lock(env))
    cfdio = [r for r in _lock(env)["roots"] if r["spec"].startswith("hpcval-cfdio")]
    assert len(found.changed) == len(cfdio) == len(found.roots_rehashed) >= 2
    for change in found.changed:
        assert change.label.startswith("hpcval-cfdio@main ^")
        assert change.aspects == ["version", "variants", "package recipe"]
        assert change.lines[0] == "version main -> 1.0.0"
    assert found.header == []
    assert found.spec_changes == 2 * len(cfdio)


def test_a_relock_on_the_target_system_names_its_os_and_libc() -> None:
    """What docs/spack.md says a re-lock on the system itself changes: the OS of every
    spec and glibc's version; each spec changed itself (its os), nothing is added,
    removed or said to change otherwise."""
    old, new = _lock("onprem-ib"), _lock("onprem-ib")
    for node in new["concrete_specs"].values():
        node["arch"]["platform_os"] = "rhel9"
    _, glibc = _one(new, "glibc")
    glibc["version"] = "2.34"
    _rehash(new, *new["concrete_specs"])
    found = spack.diff_locks(old, new)
    assert len(found.changed) == len(old["concrete_specs"])
    assert all(c.at_source and c.hash_changed for c in found.changed)
    for change in found.changed:
        assert "os debian12 -> rhel9" in change.lines
        allowed = {"os", "version"} if change.label.startswith("glibc@") else {"os"}
        assert set(change.aspects) <= allowed, change.lines
    assert not (found.added or found.removed or found.roots_added or found.roots_removed)
