"""The Spack environments as files: manifest, includes, declared target, lock; and
``hpcval spack lock``, which concretizes in place and writes nothing tracked but the lock."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hpcval.core.errors import EnvironmentFault, InputError
from hpcval.core.paths import ENVIRONMENTS_DIR, project_root
from hpcval.spack.builds import NOT_FOUND, find_spack, run_spack
from hpcval.spack.venvmpi import VENV_MPI_INCLUDE


def environment_names(root: str | Path | None = None) -> list[str]:
    """Names of the environments of the checkout (directories holding a spack.yaml)."""
    envs = Path(root or project_root()) / ENVIRONMENTS_DIR
    return sorted(p.parent.name for p in envs.glob("*/spack.yaml"))


def resolve_environment(name_or_dir: str | Path, root: str | Path | None = None) -> Path:
    """``environments/<name>`` of the checkout, or a directory holding a spack.yaml;
    raises :class:`InputError` naming the environments there are."""
    candidate = Path(name_or_dir)
    if (candidate / "spack.yaml").is_file():
        return candidate.resolve()
    envs = Path(root or project_root()) / ENVIRONMENTS_DIR
    if "/" not in str(name_or_dir) and (envs / str(name_or_dir) / "spack.yaml").is_file():
        return envs / str(name_or_dir)
    known = ", ".join(environment_names(root)) or "none"
    raise InputError(f"--env {name_or_dir}: no such Spack environment (no spack.yaml); "
                     f"known: {known}")


def _read_yaml(path: Path) -> dict[str, Any]:
    """A manifest or an include: bounded YAML (:mod:`hpcval.core.yamlio`: UTF-8, one
    line naming the file and line of a syntax error), a mapping at the top."""
    from hpcval.core.yamlio import load_yaml_bounded, read_bounded

    def error(file: str, where: str, reason: str) -> InputError:
        return InputError(f"{file}: {where + ': ' if where else ''}{reason}")

    data = load_yaml_bounded(read_bounded(path, error), str(path), error)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping at the top")
    return data


def manifest_files(env_dir: str | Path) -> list[Path]:
    """spack.yaml of *env_dir* and the files it includes (relative to it), in order;
    an include that does not exist is listed too (Spack stops on it)."""
    env_dir = Path(env_dir)
    manifest = env_dir / "spack.yaml"
    includes = (_read_yaml(manifest).get("spack") or {}).get("include") or []
    files = [manifest]
    for entry in includes:
        path = entry if isinstance(entry, str) else (entry or {}).get("path", "")
        if path:
            files.append((env_dir / path) if not Path(path).is_absolute() else Path(path))
    return files


def packages_config(env_dir: str | Path) -> tuple[dict[str, Any], list[str]]:
    """The ``packages:`` configuration of the environment: spack.yaml over its included
    files (a package's keys from spack.yaml win, lists of externals are joined), and one
    problem line per include that is missing."""
    files = manifest_files(env_dir)
    problems = []
    merged: dict[str, dict[str, Any]] = {}
    # lowest precedence first: the includes in reverse order, then spack.yaml
    for path in [*reversed(files[1:]), files[0]]:
        if not path.is_file():
            hint = (" (run `hpcval spack externals`: `make setup` runs it only when it "
                    "builds the venv)" if path.name == VENV_MPI_INCLUDE else "")
            problems.append(f"{path}: included by {files[0]} but missing{hint}")
            continue
        data = _read_yaml(path)
        section = data.get("spack", data) if path == files[0] else data
        for name, entry in ((section or {}).get("packages") or {}).items():
            into = merged.setdefault(name, {})
            for key, value in (entry or {}).items():
                if key == "externals":
                    into["externals"] = [*value, *into.get("externals", [])]
                else:
                    into[key] = value
    return merged, problems


def declared_target(env_dir: str | Path) -> str:
    """The target every node of the environment is built for: the ``target=...``
    requirement of ``packages: all: require:``; :class:`InputError` where there is none."""
    packages, _ = packages_config(env_dir)
    require = (packages.get("all") or {}).get("require") or []
    for entry in [require] if isinstance(require, str) else require:
        text = entry if isinstance(entry, str) else (entry or {}).get("spec", "")
        for word in str(text).split():
            if word.startswith("target="):
                return word.split("=", 1)[1]
    raise InputError(f"{Path(env_dir) / 'spack.yaml'}: packages:all:require: no target=...; "
                     "declare the system's microarchitecture (e.g. `- target=cascadelake`)")


def lock_is_made_here(env_dir: str | Path) -> bool:
    """True where the environment's lock records paths of this checkout: it
    includes the generated Intel MPI external of the project venv
    (:data:`VENV_MPI_INCLUDE`) or develops a package from the checkout
    (``develop:``). Spack writes both as absolute paths, so such a lock is made
    on each machine (``hpcval spack lock``) and git-ignored, never committed."""
    env_dir = Path(env_dir)
    manifest = _read_yaml(env_dir / "spack.yaml").get("spack") or {}
    return VENV_MPI_INCLUDE in [str(i) for i in manifest.get("include") or []] \
        or bool(manifest.get("develop"))


def missing_lock(env_dir: str | Path) -> str:
    """What to say of an environment without its spack.lock."""
    env_dir = Path(env_dir)
    why = (" (this environment's lock records this checkout's paths, so it is made on each "
           "machine and not committed)" if lock_is_made_here(env_dir) else "")
    return f"{env_dir / 'spack.lock'}: missing: run `hpcval spack lock --env {env_dir.name}`{why}"


def read_lock(env_dir: str | Path) -> dict[str, Any]:
    """The environment's spack.lock (JSON)."""
    path = Path(env_dir) / "spack.lock"
    if not path.is_file():
        raise InputError(missing_lock(env_dir))
    again = f"run `hpcval spack lock --env {Path(env_dir).name}`"
    try:
        lock = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 (byte offset {err.start}): not a Spack lock; "
                         f"{again}") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not valid JSON ({err}): {again}") from None
    problem = _lock_shape(lock)
    if problem:
        raise InputError(f"{path}: {problem}: not a Spack lock; {again}")
    return dict(lock)


def _lock_shape(lock: Any) -> str | None:
    """What makes *lock* no Spack lock (what hpcval reads of one), or None."""
    if not isinstance(lock, dict):
        return f"a JSON {type(lock).__name__}, not an object"
    specs = lock.get("concrete_specs", {})
    if not isinstance(specs, dict) or not all(isinstance(n, dict) and "name" in n
                                              for n in specs.values()):
        return "concrete_specs is not a map of hash to spec"
    roots = lock.get("roots", [])
    if not isinstance(roots, list) or not all(isinstance(r, dict) and r.get("hash") in specs
                                              for r in roots):
        return "roots does not list specs of concrete_specs by hash"
    return None


def paths_made_elsewhere(env_dir: str | Path, lock: dict[str, Any]) -> list[str]:
    """Paths the lock records that this checkout does not declare: an external
    whose prefix is not among the package's declared ``externals:``, a developed
    package whose ``dev_path`` is not the ``develop:`` path of spack.yaml. Spack
    installs a lock as it is, so such a lock was made in another checkout or on
    another machine and would build against what is not here."""
    env_dir = Path(env_dir)
    packages, _ = packages_config(env_dir)
    manifest = (_read_yaml(env_dir / "spack.yaml").get("spack") or {})
    develop = {name: os.path.normpath(env_dir.resolve() / str((entry or {}).get("path", name)))
               for name, entry in (manifest.get("develop") or {}).items()}
    found: list[str] = []
    for node in lock.get("concrete_specs", {}).values():
        name = node.get("name", "")
        path = (node.get("external") or {}).get("path")
        if path:
            declared = {os.path.normpath(str(e.get("prefix", "")))
                        for e in (packages.get(name) or {}).get("externals") or []}
            # an undeclared external is what Spack takes from the compiler (libc)
            if declared and os.path.normpath(path) not in declared:
                found.append(f"external {name} at {path}, declared here: "
                             f"{', '.join(sorted(declared)) or 'none'}")
        dev_path = (node.get("parameters") or {}).get("dev_path")
        if dev_path and os.path.normpath(dev_path) != develop.get(name):
            found.append(f"{name} developed from {dev_path}, here from "
                         f"{develop.get(name, 'nowhere')}")
    return sorted(set(found))


def node_target(node: dict[str, Any]) -> str:
    """The microarchitecture of a lock node."""
    target = node.get("arch", {}).get("target", "")
    return str(target.get("name", "") if isinstance(target, dict) else target)


def lock_roots(lock: dict[str, Any]) -> list[dict[str, Any]]:
    """Concrete root nodes of a lock, in the order of its roots."""
    specs = lock["concrete_specs"]
    return [specs[r["hash"]] for r in lock["roots"]]


def wrong_targets(lock: dict[str, Any], target: str) -> list[str]:
    """``name@version target=...`` of every node of a lock not built for *target*."""
    return sorted({f"{n['name']}@{n['version']} target={node_target(n)}"
                   for n in lock["concrete_specs"].values() if node_target(n) != target})


def lock_environment(env_dir: str | Path, timeout: float = 3600) -> dict[str, Any]:
    """``spack concretize -f`` in *env_dir*, writing its spack.lock (first, for an
    environment of this host, its STREAM size: :mod:`hpcval.spack.streamsize`); fails, restoring the
    files, where Spack wrote into spack.yaml or an included file (something it had to
    detect on this host is undeclared) or where a node misses the declared target.
    Returns the seconds it took, the roots and the target."""
    import time

    from hpcval.spack import streamsize

    env_dir = Path(env_dir)
    target = declared_target(env_dir)
    if env_dir.name in streamsize.HOST_ENVIRONMENTS and streamsize.includes_stream_size(env_dir):
        topo, mem = streamsize.host_node()
        streamsize.write_stream_size(env_dir, topo, mem, env_dir.name)
    tracked = {p: p.read_bytes() for p in manifest_files(env_dir) if p.is_file()}
    if find_spack() is None:
        raise EnvironmentFault(NOT_FOUND)
    start = time.monotonic()
    proc = run_spack(["concretize", "-f"], env_dir, timeout=timeout)
    seconds = time.monotonic() - start
    changed = [p for p, data in tracked.items() if not p.is_file() or p.read_bytes() != data]
    for path in changed:
        path.write_bytes(tracked[path])
    if proc.returncode != 0:
        last = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        raise InputError(f"{env_dir / 'spack.yaml'}: spack concretize failed: "
                         f"{' / '.join(last[-6:]) or 'no output'}")
    if changed:
        raise InputError(f"{changed[0]}: Spack wrote into it while concretizing (restored): "
                         "declare what it detected on this host (compilers, externals)")
    lock = read_lock(env_dir)
    wrong = wrong_targets(lock, target)
    if wrong:
        raise InputError(f"{env_dir / 'spack.yaml'}: {len(wrong)} specs not built for "
                         f"target={target}, e.g. {wrong[0]}: give their requirements "
                         f"target={target} too")
    unsized = streamsize.stream_size_problems(env_dir, lock)
    if unsized and streamsize.includes_stream_size(env_dir):
        raise InputError(unsized[0])
    return {"env": env_dir.name, "seconds": seconds, "target": target,
            "roots": len(lock["roots"]), "specs": len(lock["concrete_specs"])}
