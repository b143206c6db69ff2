"""``hpcval spack``: the machine-specific parts of the Spack environments, their locks,
and what an install assumes, checked before it starts."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hpcval import spack
from hpcval.core.errors import EnvironmentFault, InputError
from hpcval.core.fileio import atomic_write


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("spack", help="Spack environments: externals, locks, pre-install checks")
    ssub = p.add_subparsers(dest="action", metavar="ACTION")
    ssub.required = True
    ext = ssub.add_parser(
        "externals", help=f"write environments/*/{spack.VENV_MPI_INCLUDE}",
        description="Declare the Intel MPI wheels of a venv (default: the one running hpcval) "
        f"as Spack's intel-oneapi-mpi external, in {spack.VENV_MPI_INCLUDE} next to every "
        "environment that includes that file. make setup runs this.")
    ext.add_argument("--prefix", type=Path, default=Path(sys.prefix),
                     help="venv holding impi-rt/impi-devel (default: %(default)s)")
    ext.set_defaults(func=_externals)

    lock = ssub.add_parser(
        "lock", help="concretize environments and write their spack.lock",
        description="Concretize each environment (default: all of environments/) in place, "
        "one at a time, writing its spack.lock. Fails, restoring the files, where "
        "Spack wrote into spack.yaml or an include (an undeclared compiler or external it "
        "detected on this host) or where a spec misses the declared target. Takes minutes "
        "per environment (docs/spack.md).")
    lock.add_argument("--env", action="append", metavar="E",
                      help="environment name or directory (repeatable; default: all)")
    lock.add_argument("--diff", action="store_true",
                      help="compare the new lock with the one there was, spec by spec: roots "
                      "added/removed, per package its version, variants, compiler, target, "
                      "dependencies and why its hash changed; the Spack header (_meta, spack "
                      "version/type/commit) shown apart and not counted. Exit 0: no spec "
                      "changes (a lock whose only difference is the header keeps its bytes), "
                      "1: spec changes (docs/spack.md, section 4)")
    lock.add_argument("--against", type=Path, metavar="FILE",
                      help="with --diff and one --env: compare the environment's spack.lock "
                      "with FILE (a lock made elsewhere) instead of re-locking; needs no Spack")
    lock.set_defaults(func=_lock)

    mir = ssub.add_parser(
        "mirror", help="make the source mirror of an environment from repository clones",
        description="Read the versions the environment's lock pins, make each archive a "
        "git clone reproduces (git archive | gzip -n: IMB, IOR, STREAM, Spack's "
        "compiler-wrapper) from the clones under --sources, and put it in the mirror only "
        "when its sha256 is the one Spack's package.py declares. Lists every other source "
        "with the URL to fetch it from on a machine with network. Exit 0 when everything "
        "makeable here is in the mirror, 3 when a clone is missing or an archive does not "
        "match its package (docs/spack.md, section 3).")
    mir.add_argument("--env", required=True, metavar="E", help="environment name or directory")
    mir.add_argument("--sources", type=Path, metavar="DIR",
                     help="directory of the source clones, one per repository, named as the "
                     f"repository (default: ${spack.SOURCES_ENV}, else <mirror>/../sources)")
    mir.add_argument("--mirror", type=Path, metavar="DIR",
                     help="the mirror directory (default: the file:// mirror of "
                     "$SPACK_ROOT/etc/spack/site/mirrors.yaml)")
    mir.add_argument("--builtin", type=Path, metavar="DIR",
                     help="Spack's builtin package repository at the pinned commit (default: "
                     "the one $SPACK_ROOT/etc/spack/site/repos.yaml names)")
    mir.set_defaults(func=_mirror)

    ins = ssub.add_parser(
        "install", help="install every root of an environment an offline install can build",
        description="Run the doctor's checks; when nothing is broken, `spack -e E install` the "
        "roots whose every source is in the local mirror (or needs none), and name each root "
        "left out with the sources it lacks. Exit 0 when every root is installed, 1 when "
        "some could not be (sources missing), 3 when the environment is broken or the "
        "install fails.")
    ins.add_argument("--env", required=True, metavar="E", help="environment name or directory")
    ins.add_argument("--dry-run", action="store_true",
                     help="print the spack command and the roots left out; install nothing")
    ins.set_defaults(func=_install)

    doc = ssub.add_parser(
        "doctor", help="check what `spack install` of an environment assumes",
        description="Before `spack install`: every declared external's prefix exists and "
        "holds what it claims (mpicc of that MPI, libmpi, srun), every declared compiler "
        "exists at its version, the lock names the declared target, and the local mirrors "
        "hold every source an offline install needs (each missing archive named with its URL "
        "and sha256, each present archive checked against its sha256). One line per finding. "
        "Exit 0: ready to install every root; 1: ready for a subset (only sources are "
        "missing: `hpcval spack install` builds the roots it names); 3: broken.")
    doc.add_argument("--env", required=True, metavar="E", help="environment name or directory")
    doc.set_defaults(func=_doctor)

    ver = ssub.add_parser(
        "proxy-version", help="check that each proxy's VERSION still names its sources",
        description="hpcval's proxies (proxies/cfdio, proxies/gpubench) are built by version: "
        "proxies/<name>/VERSION, and SHA256SUMS holds the sha256 of every file the build "
        "uses (Makefile, *.c, *.h, *.cu). Exit 2, naming the files, when one changed, appeared or "
        "went since the sums were written for that VERSION: bump VERSION, then --update.")
    ver.add_argument("--update", action="store_true",
                     help="write SHA256SUMS for the current VERSION (refused while VERSION "
                     "is the one the old sums were written for)")
    ver.set_defaults(func=_proxy_version)


def _externals(args: argparse.Namespace) -> int:
    for path in spack.write_venv_externals(args.prefix):
        print(path)
    for path in spack.write_host_stream_sizes():
        print(path)
    return 0


def _lock(args: argparse.Namespace) -> int:
    if args.against is not None and not args.diff:
        raise InputError(f"--against {args.against}: only with --diff (compare the "
                         "environment's lock with that file)")
    if args.diff:
        return _lock_diff(args)
    names = args.env or spack.environment_names()
    dirs = [spack.resolve_environment(n) for n in names]
    for env_dir in dirs:
        print(f"{env_dir}: concretizing ...", flush=True)
        done = spack.lock_environment(env_dir)
        print(f"{env_dir / 'spack.lock'}: {done['roots']} roots, {done['specs']} specs, "
              f"target={done['target']}, {done['seconds']:.0f} s", flush=True)
    return 0


def _lock_diff(args: argparse.Namespace) -> int:
    """``hpcval spack lock --diff``: re-lock (or read --against FILE) and review."""
    if not args.env:
        raise InputError("--diff: name the environment: --env E (one whose spack.lock is "
                         "there to compare with)")
    if args.against is not None and len(args.env) != 1:
        raise InputError(f"--against {args.against}: give exactly one --env E (its spack.lock "
                         "is compared with the file)")
    dirs = [spack.resolve_environment(n) for n in args.env]
    before = {}
    for env_dir in dirs:  # every input checked before minutes of concretizing
        path = env_dir / "spack.lock"
        if not path.is_file():
            raise InputError(spack.missing_lock(env_dir))
        before[env_dir] = (spack.read_lock_file(path, f"run `hpcval spack lock --env "
                                                      f"{env_dir.name}`"), path.read_bytes())
    against = (spack.read_lock_file(args.against, "--against: give a spack.lock that Spack "
                                    "wrote") if args.against is not None else None)
    changes = 0
    for env_dir in dirs:
        path = env_dir / "spack.lock"
        old, old_bytes = before[env_dir]
        if against is not None:
            new, name = against, str(args.against)
        else:
            print(f"{env_dir}: concretizing ...", flush=True)
            try:
                done = spack.lock_environment(env_dir)
            except BaseException:
                if not path.is_file() or path.read_bytes() != old_bytes:
                    atomic_write(path, old_bytes, "restoring the lock")
                raise
            print(f"{path}: {done['roots']} roots, {done['specs']} specs, "
                  f"target={done['target']}, {done['seconds']:.0f} s", flush=True)
            new, name = spack.read_lock_file(path), f"{path} (new)"
        print(f"{path} -> {name}")
        found = spack.diff_locks(old, new)
        for line in found.lines():
            print(line)
        if against is None and found.spec_changes == 0 and path.read_bytes() != old_bytes:
            atomic_write(path, old_bytes, "restoring the lock")
            print(f"{path}: kept as it was: the new lock differs only in its header")
        elif against is None and found.spec_changes and not spack.lock_is_made_here(env_dir):
            print(f"{path}: the new lock is in place: commit it if every change above is "
                  f"intended, else `git checkout -- {path}` puts the committed one back")
        changes += found.spec_changes
    return 1 if changes else 0


def _proxy_version(args: argparse.Namespace) -> int:
    for name in spack.VERSIONED_PROXIES:
        if args.update:
            version, written = spack.update_proxy_sums(name)
            sums = spack.proxy_dir(name) / "SHA256SUMS"
            print(f"proxies/{name}: VERSION {version}, "
                  f"{'wrote ' + str(sums) if written else 'sums up to date'}")
            continue
        problem = spack.proxy_version_problem(name)
        if problem:
            raise InputError(problem)
        print(f"proxies/{name}: VERSION {(spack.proxy_dir(name) / 'VERSION').read_text().strip()}"
              ", sources as summed")
    return 0


def _mirror(args: argparse.Namespace) -> int:
    env_dir = spack.resolve_environment(args.env)
    mirror = args.mirror or spack.default_mirror()
    unset = "" if os.environ.get("SPACK_ROOT") else " ($SPACK_ROOT is not set)"
    if mirror is None:
        raise InputError("--mirror: none given and no file:// mirror in "
                         f"$SPACK_ROOT/etc/spack/site/mirrors.yaml{unset}: give --mirror DIR "
                         "(docs/spack.md, section 1)")
    builtin = args.builtin or spack.default_builtin()
    if builtin is None:
        raise InputError("--builtin: none given and no builtin repository in "
                         f"$SPACK_ROOT/etc/spack/site/repos.yaml{unset}: give --builtin DIR "
                         "(docs/spack.md, section 1)")
    clones = args.sources or (Path(os.environ[spack.SOURCES_ENV])
                              if os.environ.get(spack.SOURCES_ENV)
                              else Path(mirror).parent / "sources")
    sources_flag = "--sources" if args.sources else (
        f"${spack.SOURCES_ENV}" if os.environ.get(spack.SOURCES_ENV) else "--sources")
    for flag, folder in (("--mirror", Path(mirror)), (sources_flag, clones),
                         ("--builtin", Path(builtin))):
        if folder.exists() and not folder.is_dir():
            raise InputError(f"{flag} {folder}: a file, not a directory: give the directory "
                             "(docs/spack.md, section 3)")
    sources = spack.environment_sources(env_dir, builtin)
    result = spack.make_mirror(sources, Path(mirror), clones)
    if result.sums:
        print(f"manifest: {spack.write_manifest(Path(mirror), result.sums)} "
              f"({len(result.sums)} archives with their sha256)")
    for line in result.present:
        print(f"in the mirror: {line}")
    for line in result.made:
        print(f"made: {line}")
    for line in result.need_network:
        print(f"needs network: {line}")
    for line in result.missing_clones:
        print(f"missing clone: {line}")
    for line in result.wrong:
        print(f"wrong: {line}")
    print(f"{env_dir.name}: {len(result.made) + len(result.present)} of {len(sources)} sources "
          f"in {mirror}; {len(result.need_network)} need a machine with network")
    if result.wrong or result.missing_clones:
        raise EnvironmentFault(f"{len(result.wrong) + len(result.missing_clones)} sources "
                               "could not be made here (above)")
    return 0


def _print_diagnosis(found: spack.Diagnosis) -> None:
    for line in found.problems:
        print(line)
    for line in found.missing:
        print(line)
    for root, lacking in found.blocked.items():
        print(f"not installable offline: {root}: lacks the sources of {', '.join(lacking)}")
    for line in found.notes:
        print(f"note: {line}")


def _doctor(args: argparse.Namespace) -> int:
    env_dir = spack.resolve_environment(args.env)
    found = spack.doctor(env_dir)
    _print_diagnosis(found)
    verdict = found.verdict
    if verdict == "broken":
        raise EnvironmentFault(f"{len(found.problems) or len(found.blocked)} problems in "
                               f"{env_dir}: fix them before `spack install`")
    if verdict == "subset":
        print(f"{env_dir}: ready for a subset: {len(found.ready)} of "
              f"{len(found.ready) + len(found.blocked)} roots install offline "
              f"(`hpcval spack install --env {env_dir.name}`)")
    else:
        print(f"{env_dir}: ready to install all roots")
    return spack.DOCTOR_EXIT[verdict]


def _install(args: argparse.Namespace) -> int:
    import subprocess

    env_dir = spack.resolve_environment(args.env)
    found = spack.doctor(env_dir)
    _print_diagnosis(found)
    if found.verdict == "broken":
        raise EnvironmentFault(f"{env_dir}: broken (above): nothing installed")
    ready = found.ready_hashes
    cmd = [str(spack.find_spack()), "-e", str(env_dir), "install", *[f"/{h}" for h in ready]]
    print(f"installing {len(ready)} of {len(ready) + len(found.blocked)} roots: "
          f"{' '.join(cmd)}", flush=True)
    if args.dry_run:
        return spack.DOCTOR_EXIT[found.verdict]
    if ready:
        proc = subprocess.run(cmd, check=False)
        if proc.returncode != 0:
            raise EnvironmentFault(f"spack install of {env_dir.name} failed (exit "
                                   f"{proc.returncode}): see its output above")
    for root, lacking in found.blocked.items():
        print(f"not installed: {root}: its sources are not in the mirror "
              f"({', '.join(lacking)}): fetch them on a machine with network (docs/spack.md, "
              "section 3)")
    print(f"{env_dir.name}: {len(ready)} roots installed, {len(found.blocked)} not obtainable "
          "offline")
    return 1 if found.blocked else 0
