"""``hpcval spack``: the machine-specific parts of the Spack environments."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hpcval import spack


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("spack", help="machine-specific Spack configuration of the environments")
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


def _externals(args: argparse.Namespace) -> int:
    for path in spack.write_venv_externals(args.prefix):
        print(path)
    return 0
