"""``hpcval validate``: run the checks on a site, store and judge them."""

from __future__ import annotations

import argparse
import os
import re

from hpcval.history.runsets import parse_tag
from hpcval.node.sizing import BUDGET_ENV, BUDGETS
from hpcval.run.lock import seconds
from hpcval.run.runner import DEFAULT_LOCK_TIMEOUT, validate
from hpcval.site import Site


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="run the checks on a site, print the verdict, write the HTML report",
        description="Run ReFrame with the site's configuration and references, store every "
        "figure with its samples in var/<site>/, judge each against the site's references and "
        "against its own history, print the verdict and write an HTML report. Exit 0: all "
        "passed; 1: a check failed or a figure regressed; 2: wrong input; 3: environment "
        "fault (disk full, store unusable, lock held). Arguments after -- go to reframe "
        "(e.g. -- -t pingpong).",
    )
    p.add_argument("--site", default="local", help="site under site-configs/ (default: local)")
    p.add_argument("--record", action="store_true",
                   help="run the checks without judging them, then write the site's "
                   "references.yaml and host-expectations.yaml from what was measured "
                   "(for a new site; review the files before committing)")
    p.add_argument("--lock-timeout", type=seconds, default=DEFAULT_LOCK_TIMEOUT, metavar="S",
                   help="seconds to wait for another validation of the site to finish "
                   f"(default {DEFAULT_LOCK_TIMEOUT:g})")
    p.add_argument("--earlier-run", choices=("stop", "wait"), default="stop",
                   help="processes of an earlier run whose hpcval died (SIGKILL) still "
                   "running: stop them before this run starts (default), or wait up to "
                   "--lock-timeout for them to end, then stop what is left; either way the "
                   "earlier run is stored as orphaned (docs/errors.md)")
    p.add_argument("--budget", choices=BUDGETS,
                   help="problem sizes: quick (minutes) or full (acceptance, every case on "
                   "every MPI stack); default: the site's partitions' extras.budget, else "
                   "quick (docs/checks.md)")
    p.add_argument("--matrix", choices=MATRICES,
                   help="which cases: first (one case per benchmark family on the site's "
                   "first MPI stack: a first contact in minutes) or full (every case on every "
                   "MPI stack); default: first, full with --budget full or --record; options "
                   "after -- that select cases (-n, -t, -p, -x, ...) select instead")
    p.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                   help="store this tag with the run (repeatable), e.g. --tag nic=gvnic; "
                   "`hpcval compare tag:nic=gvnic ...` selects the runs by it and "
                   "`hpcval history` shows it")
    p.add_argument("reframe_args", nargs=argparse.REMAINDER,
                   help="extra reframe options, after --")
    p.set_defaults(func=_run)


#: ``--matrix``: one case per benchmark family on one MPI stack, or every case.
MATRICES = ("first", "full")

#: The first-contact cases: one per benchmark family, as regexes on ReFrame's
#: display names without spaces (what ``-n`` matches). A family whose program
#: is not installed is skipped by its check, saying so; one that needs two
#: nodes (``+internode``) exists only where the site has them.
FIRST_CONTACT: dict[str, str] = {
    "host audit": "^host_tuning_audit_check$",
    "IMB in a node": "^imb_pingpong_check%cache=warm$",
    "IMB between nodes": "^imb_pingpong_internode_check%cache=warm$",
    "OSU": "^osu_latency_check$",
    "STREAM": "^stream_check$",
    "cfdio memory": "^cfdio_triad_check$",
    "cfdio output": "^cfdio_output_cost_check%strategy=mpiio%ranks=1$",
    "IOR": "^ior_check%api=POSIX%layout=file-per-process$",
    "HPCG": "^hpcg_check$",
    "WRF": "^wrf_idealized_check$",
}

#: ReFrame options that select cases: given any, the user selects.
SELECTING = ("-n", "--name", "-x", "--exclude", "-t", "--tag", "-T", "--exclude-tag",
             "-p", "--prgenv", "-E", "--filter-expr", "--failed", "--cpu-only", "--gpu-only",
             "--maintainer", "--mode", "--system")


def selects(reframe_args: list[str]) -> bool:
    """Whether the options after ``--`` select cases themselves."""
    return any(a in SELECTING or a.startswith(tuple(f"{o}=" for o in SELECTING if
                                                       o.startswith("--")))
               or (a[:2] in SELECTING and len(a) > 2 and not a.startswith("--"))
               for a in reframe_args)


def first_stack(site: Site) -> str | None:
    """The site's first MPI programming environment (its partitions' order)."""
    cfg = site.reframe_config()
    envs = {e.get("name"): e for e in cfg["environments"] or []}
    for system in cfg["systems"] or []:
        if system.get("name") == "generic":
            continue
        for part in system.get("partitions", []):
            for name in part.get("environs", []):
                if "mpi" in (envs.get(name, {}).get("features") or []):
                    return str(name)
    return None


def first_contact_args(site: Site) -> tuple[list[str], str]:
    """ReFrame's options for a first contact (one case per benchmark family
    on the first MPI stack, plus the non-MPI ``plain`` environment of the
    audits) and one line saying what they select."""
    stack = first_stack(site)
    args = ["-n", "|".join(FIRST_CONTACT.values())]
    if stack:
        args += ["-p", f"^({re.escape(stack)}|plain)$"]
    on = f"on MPI stack {stack!r}" if stack else "on every environment"
    return args, (f"hpcval: first contact: one case per benchmark family {on} "
                  f"({', '.join(FIRST_CONTACT)}); every case on every stack: --matrix full "
                  "or --budget full")


def _run(args: argparse.Namespace) -> int:
    extra = [a for a in args.reframe_args if a != "--"] if args.reframe_args else []
    tags = dict(parse_tag(t) for t in args.tag)  # wrong input before anything is loaded
    if args.budget:
        os.environ[BUDGET_ENV] = args.budget  # the checks read it (hpcval.rfm.sizing)
    matrix = args.matrix or ("full" if args.budget == "full" or args.record else "first")
    if matrix == "first" and not selects(extra):
        chosen, said = first_contact_args(Site.load(args.site))
        print(said, flush=True)
        extra = [*chosen, *extra]
    return validate(args.site, extra, record=args.record, lock_timeout=args.lock_timeout,
                    wait_earlier=args.earlier_run == "wait", tags=tags or None).exit_code
