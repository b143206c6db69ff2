"""``hpcval health``: the per-node gate for Slurm's HealthCheckProgram."""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys
import time
from pathlib import Path

from hpcval.commands.vet import MAX_SAMPLES
from hpcval.core.errors import EXIT_ENVIRONMENT, HpcvalError, InputError
from hpcval.core.runid import new_run_id
from hpcval.vet import sitecfg
from hpcval.vet.health import judge_health
from hpcval.vet.healthdrain import ShareRule
from hpcval.vet.healthgate import GateOptions, run_gate
from hpcval.vet.judge import JudgeSettings
from hpcval.vet.run import stored_results
from hpcval.vet.slurm import check_node_name


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "health", help="gate this node for Slurm's HealthCheckProgram: one line, exit 1 and "
        "drain when it is off",
        description="Measure the node this runs on (tuning audit, CPU frequency, triad, "
        "shared-memory PingPong; no Slurm job) within --budget seconds, judge it against "
        "its partition in the last full 'hpcval vet' (var/<site>/vet/*/vet.json) and against "
        "its own accepted history there, a finding confirmed by a second pass after a random "
        "delay; print one line. Exit 0: ok (with --drain a node hpcval health drained is "
        "resumed); 1: off (drained with the evidence as the reason with --drain, unless "
        "hpcval already drained --drain-share of the partition within --drain-window); 2: "
        "no full vetting to judge against, or wrong input; 3: a measurement failed or ran "
        "out of time, or the node's CPUs were too busy to judge (nothing drained or "
        "resumed).")
    p.add_argument("--site", required=True, help="site name (site-configs/<site>/)")
    p.add_argument("--partition", help="Slurm (or ReFrame) partition; default: the site's "
                   "first Slurm partition")
    p.add_argument("--node", help="this node's Slurm name (default: $SLURMD_NODENAME, which "
                   "slurmd sets for its HealthCheckProgram, else the host name)")
    p.add_argument("--drain", action="store_true", help="drain the node when it is off, with "
                   "a reason naming hpcval and the evidence")
    p.add_argument("--environ", default="impi", help="the site's MPI environment (default impi)")
    p.add_argument("--samples", type=int, default=5, help="samples per figure (default 5)")
    p.add_argument("--record-dir", type=Path, default=None, metavar="DIR",
                   help="where the gate's record goes (default var/<site>/health/); a "
                   "directory of the node where var/ is shared read-only")
    p.add_argument("--budget", type=float, default=50.0,
                   help="seconds for all measurements (default 50: slurmd kills its "
                   "HealthCheckProgram at 60 s)")
    p.add_argument("--drain-share", type=float, default=5.0, metavar="PERCENT",
                   help="--drain: refuse to drain when hpcval health already drained this "
                   "share of the partition within --drain-window (default 5; one node may "
                   "always be drained)")
    p.add_argument("--drain-window", type=float, default=3600.0, metavar="SECONDS",
                   help="--drain: the window of --drain-share (default 3600)")
    p.add_argument("--confirm-delay", type=float, nargs=2, default=(2.0, 10.0),
                   metavar=("LOW", "HIGH"), help="random delay before a confirming pass "
                   "(seconds, default 2 10): a finding counts only when two passes agree")
    p.add_argument("--spread", type=float, default=0.0, metavar="SECONDS",
                   help="wait a random 0..SECONDS before measuring (default 0), so nodes "
                   "Slurm starts together do not all measure at once")
    p.set_defaults(func=_guarded)


def _guarded(args: argparse.Namespace) -> int:
    """:func:`_health`, where a fault of hpcval itself exits 3, never 1: Python ends
    an uncaught exception with 1, which a prolog passes on as "drain this node"."""
    try:
        return _health(args)
    except (HpcvalError, KeyboardInterrupt, OSError):
        raise  # the command line says these in one line, with their own codes
    except Exception as err:  # noqa: BLE001 - the node is not at fault
        where = f"{type(err).__name__} at {_origin(err)}"
        print(f"hpcval: error: health: not judged: hpcval failed ({where}: {err}); the node "
              f"is not drained for it; exit {EXIT_ENVIRONMENT}", file=sys.stderr)
        return EXIT_ENVIRONMENT


def _origin(err: BaseException) -> str:
    """file:line where ``err`` was raised (for the report of a bug, in one line)."""
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return f"{Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb else "?"


#: The longest --budget: a gate that measures for more than an hour is no gate
#: (slurmd kills a HealthCheckProgram at 60 s; a prolog delays the job by it).
MAX_BUDGET = 3600.0


def node_name(args: argparse.Namespace) -> str:
    """``--node``, else ``$SLURMD_NODENAME``, else the host name; a Slurm node
    name (it names the stored file and goes to ``scontrol``)."""
    if args.node is not None:
        name, source = args.node, "--node"
    elif os.environ.get("SLURMD_NODENAME"):
        name, source = os.environ["SLURMD_NODENAME"], "$SLURMD_NODENAME"
    else:
        name, source = socket.gethostname().split(".")[0], "the host name"
    return check_node_name(name, source)


def _health(args: argparse.Namespace) -> int:
    # wrong input is said before anything is read or measured (exit 2, never 1:
    # a prolog that exits 1 drains the node)
    if not 3 <= args.samples <= MAX_SAMPLES:
        raise InputError(f"--samples {args.samples}: at least 3, at most {MAX_SAMPLES}; "
                         "exit 2")
    if not (math.isfinite(args.budget) and 1.0 < args.budget <= MAX_BUDGET):
        raise InputError(f"--budget {args.budget:g}: give the seconds the measurements may "
                         f"take, more than 1 and at most {MAX_BUDGET:.0f} (default 50: slurmd "
                         "kills its HealthCheckProgram at 60 s); exit 2")
    opts = _gate_options(args)
    t0 = time.monotonic()
    node = node_name(args)
    site = sitecfg.load(args.site, args.partition, args.environ)
    settings = JudgeSettings()
    try:
        # judged first against what is stored: a missing or bad vetting is said
        # before measuring
        results = stored_results(site)
        judge_health(node, {}, [], results, settings, str(site.var / "vet"))
    except HpcvalError as err:
        print(f"health {node}: not judged: {err}")
        return err.exit_code
    opts.budget -= time.monotonic() - t0
    line, code = run_gate(site, node, results, settings, opts, new_run_id())
    print(line, flush=True)
    return code


def _gate_options(args: argparse.Namespace) -> GateOptions:
    """The confirmation and drain settings, checked (exit 2 naming the flag)."""
    low, high = args.confirm_delay
    for flag, value in (("--confirm-delay", low), ("--confirm-delay", high),
                        ("--drain-share", args.drain_share),
                        ("--drain-window", args.drain_window), ("--spread", args.spread)):
        if not math.isfinite(value):
            raise InputError(f"{flag} {value:g}: a finite number; exit 2")
    if not 0 <= low <= high:
        raise InputError(f"--confirm-delay {low:g} {high:g}: LOW and HIGH seconds with "
                         "0 <= LOW <= HIGH; exit 2")
    if not 0 < args.drain_share <= 100:
        raise InputError(f"--drain-share {args.drain_share:g}: a percentage above 0 and at "
                         "most 100; exit 2")
    if args.drain_window <= 0:
        raise InputError(f"--drain-window {args.drain_window:g}: seconds above 0; exit 2")
    if args.spread < 0:
        raise InputError(f"--spread {args.spread:g}: seconds, at least 0; exit 2")
    return GateOptions(samples=args.samples, budget=args.budget, confirm=(low, high),
                       spread=args.spread, drain=args.drain,
                       rule=ShareRule(args.drain_share / 100, args.drain_window),
                       record_dir=args.record_dir)
