"""``hpcval spack``: the machine-specific parts of the Spack environments, their locks,
and what an install assumes, checked before it starts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hpcval import spack
from hpcval.core.errors import EnvironmentFault, InputError


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
    lock.set_defaults(func=_lock)

    doc = ssub.add_parser(
        "doctor", help="check what `spack install` of an environment assumes",
        description="Before `spack install`: every declared external's prefix exists and "
        "holds what it claims (mpicc of that MPI, libmpi, srun), every declared compiler "
        "exists at its version, the lock names the declared target, and the local mirrors "
        "hold every source an offline install needs (each missing archive named with its URL "
        "and sha256). One line per problem; exit 3 when there is one.")
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
    return 0


def _lock(args: argparse.Namespace) -> int:
    names = args.env or spack.environment_names()
    dirs = [spack.resolve_environment(n) for n in names]
    for env_dir in dirs:
        print(f"{env_dir}: concretizing ...", flush=True)
        done = spack.lock_environment(env_dir)
        print(f"{env_dir / 'spack.lock'}: {done['roots']} roots, {done['specs']} specs, "
              f"target={done['target']}, {done['seconds']:.0f} s", flush=True)
    return 0


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


def _doctor(args: argparse.Namespace) -> int:
    env_dir = spack.resolve_environment(args.env)
    problems, notes = spack.doctor(env_dir)
    for line in problems:
        print(line)
    for line in notes:
        print(f"note: {line}")
    if problems:
        raise EnvironmentFault(f"{len(problems)} problems in {env_dir}: fix them before "
                               "`spack install`")
    print(f"{env_dir}: ready for spack install")
    return 0
