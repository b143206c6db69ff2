"""The ``hpcval`` command line.

Each sub-command lives in its own module under :mod:`hpcval.commands` and
exposes ``register(subparsers)``; this module only discovers and dispatches.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path

from hpcval import __version__, commands
from hpcval.core.errors import EXIT_INTERRUPTED, HpcvalError
from hpcval.core.fileio import os_fault, warnings_to_log


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hpcval",
        description="Validate a cluster: run ReFrame checks against per-site references.",
    )
    parser.add_argument("--version", action="version", version=f"hpcval {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


#: hpcval's own log (library warnings): in the site's results store
LOG_NAME = "hpcval.log"


def _log_of(args: argparse.Namespace) -> Path:
    """``var/<site>/hpcval.log`` for a command about a site, else ``var/hpcval.log``."""
    from hpcval.core.paths import project_root
    from hpcval.site import SITE_NAME, var_base

    try:
        base = var_base(project_root())
    except HpcvalError:
        base = Path("var")
    site = getattr(args, "site", None)
    if isinstance(site, str) and SITE_NAME.fullmatch(site):
        return base / site / LOG_NAME
    return base / LOG_NAME


def check_trust(args: argparse.Namespace) -> None:
    """As root, before anything runs: the code, the checkout's checks and
    proxies, the site's files and its results store must be root's alone
    (:mod:`hpcval.core.trust`; nothing is checked for other users)."""
    from hpcval.core import trust

    if not trust.as_root():
        return
    trust.harden_umask()
    trust.check_code()
    from hpcval.core.paths import SITE_CONFIGS_DIR, project_root
    from hpcval.site import SITE_NAME, var_base

    try:
        checkout = project_root()
    except HpcvalError:
        return  # the command says so, if it needs a checkout
    site = getattr(args, "site", None)
    known = isinstance(site, str) and SITE_NAME.fullmatch(site) is not None
    trust.check_site(checkout, checkout / SITE_CONFIGS_DIR / site if known else None,
                     var_base(checkout) / site if known else None)


def _rebuild_leftovers(args: argparse.Namespace) -> None:
    """What a killed ``store rebuild`` left beside the site's store: removed
    (or named while the site lock is held) by whichever command comes next."""
    from hpcval.run.leftovers import settle_rebuild_leftovers

    site = getattr(args, "site", None)
    if isinstance(site, str) and _log_of(args).parent.name == site:
        line = settle_rebuild_leftovers(_log_of(args).parent)
        if line:
            print(line, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        check_trust(args)  # as root: before anything of the site is read or removed
        _rebuild_leftovers(args)
        with warnings_to_log(_log_of(args), f"hpcval {args.command}"):
            return int(args.func(args) or 0)
    except HpcvalError as err:
        print(f"hpcval: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("hpcval: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # output piped into e.g. `head`, which stopped reading: not an error
        sys.stderr.close()
        return 0
    except OSError as err:
        # a file system fault no command foresaw: one line naming the path
        fault = os_fault(err.filename or "?", err, f"running `hpcval {args.command}`")
        print(f"hpcval: error: {fault}", file=sys.stderr)
        return fault.exit_code


if __name__ == "__main__":
    sys.exit(main())
