"""``hpcval offline``: what a machine without network needs, made on one with network."""

from __future__ import annotations

import argparse
from pathlib import Path

from hpcval.core.errors import EnvironmentFault


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("offline", help="bundle what an offline site needs")
    osub = p.add_subparsers(dest="action", metavar="ACTION")
    osub.required = True
    bun = osub.add_parser(
        "bundle", help="make one folder an offline machine installs hpcval and Spack from",
        description="On a machine with network: Spack and its builtin packages at the pins "
        "(tarballs of the pinned commits), hpcval's whole Python stack and clingo as wheels "
        "for the target platform and Python, the Debian packages of `make system-deps` with "
        "their dependencies (this machine's release), the environment's source mirror with a "
        "sha256 manifest of every archive (STREAM at a pinned commit; OSU and HPCG where "
        "fetchable), and a SHA256SUMS of the whole folder. Exit 0: complete (published "
        "archives may be missing, listed); 2: wrong input, nothing made; 3: a part could not "
        "be made (named; the others are written). docs/spack.md, section 1.")
    bun.add_argument("--env", required=True, metavar="E", help="environment name or directory")
    bun.add_argument("--platform", required=True, metavar="P",
                     help="the target's wheel platform tag, e.g. manylinux_2_28_x86_64")
    bun.add_argument("--python-version", required=True, metavar="V",
                     help="the target venv's Python, MAJOR.MINOR (e.g. 3.11)")
    bun.add_argument("--out", required=True, type=Path, metavar="DIR",
                     help="the bundle folder: new, empty, or a bundle to complete")
    bun.add_argument("--spack", type=Path, metavar="CLONE",
                     help="a git clone of spack/spack holding the pinned commit")
    bun.add_argument("--spack-packages", type=Path, metavar="CLONE",
                     help="a git clone of spack/spack-packages holding the pinned commit")
    bun.add_argument("--sources", type=Path, metavar="DIR",
                     help="clones of the source repositories (as for `hpcval spack mirror`; "
                     "default: $HPCVAL_SPACK_SOURCES)")
    bun.add_argument("--release", metavar="CODENAME",
                     help="the target's Debian release; must be this machine's (default: it)")
    bun.add_argument("--no-debs", action="store_true",
                     help="leave the Debian packages out (a target that is not Debian)")
    bun.set_defaults(func=_bundle)


def _bundle(args: argparse.Namespace) -> int:
    from hpcval import spack
    from hpcval.offline import bundle

    env_dir = spack.resolve_environment(args.env)
    done = bundle.make_bundle(env_dir, args.platform, args.python_version, args.out,
                              spack_clone=args.spack, packages_clone=args.spack_packages,
                              sources=args.sources, release=args.release,
                              with_debs=not args.no_debs)
    for line in done.made:
        print(f"made: {line}")
    for line in done.optional_missing:
        print(f"not in the bundle (optional): {line}")
    for line in done.missing:
        print(f"missing: {line}")
    print(f"{args.out}: bundle for {env_dir.name}, Python {args.python_version} on "
          f"{args.platform}; {args.out / bundle.SUMS} written "
          f"({', '.join(f'{k} {v:.0f} s' for k, v in done.seconds.items())})")
    if done.missing:
        raise EnvironmentFault(f"{args.out}: incomplete: {len(done.missing)} parts missing "
                               "(above)")
    return 0
