"""``hpcval health``: the per-node gate for Slurm's HealthCheckProgram."""

from __future__ import annotations

import argparse
import os
import socket
import time

from hpcval.core.errors import HpcvalError, InputError
from hpcval.core.runid import new_run_id
from hpcval.vet import sitecfg
from hpcval.vet.health import judge_health
from hpcval.vet.healthdrain import ShareRule
from hpcval.vet.healthgate import GateOptions, run_gate
from hpcval.vet.judge import JudgeSettings
from hpcval.vet.run import stored_results


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
    p.set_defaults(func=_health)


def _health(args: argparse.Namespace) -> int:
    if args.samples < 3:
        raise InputError("--samples: at least 3; exit 2")
    opts = _gate_options(args)
    t0 = time.monotonic()
    node = args.node or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    site = sitecfg.load(args.site, args.partition, args.environ)
    settings = JudgeSettings()
    results = stored_results(site)
    try:
        # judged first against what is stored: a missing vetting is said before measuring
        judge_health(node, {}, [], results, settings)
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
                       rule=ShareRule(args.drain_share / 100, args.drain_window))
