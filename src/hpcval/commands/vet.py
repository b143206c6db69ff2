"""``hpcval vet``: find the node or link that is off, and gate nodes before they return."""

from __future__ import annotations

import argparse
import math
import sys

from hpcval.core.errors import InputError
from hpcval.vet import sitecfg, terminal
from hpcval.vet.judge import JudgeSettings
from hpcval.vet.measure import Settings
from hpcval.vet.run import EXIT_INCOMPLETE, Options, gate, vet
from hpcval.vet.slurm import check_node_name


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "vet", help="vet every node and link of a partition; name the culprits (exit 1)",
        description="Measure every node of a Slurm partition at once (triad, shared-memory "
        "PingPong, tuning audit, CPU frequency) and every node pair in rounds of disjoint "
        "pairs (IMB PingPong), inside one allocation; judge each node against its own "
        "partition (median and MAD) and the site's references; name slow nodes, links and "
        "switches with their evidence. Results: var/<site>/vet/<id>/ (vet.json, vet.html, "
        "vet.txt). Exit 0: nothing named; 1: a node, link or switch named (or --gate says "
        "no); 2: wrong input (also: a plan over the cluster's MaxStepCount, a triad size "
        "past the memory); 3: Slurm or the results store failed; 4: incomplete, a node or "
        "pair could not be measured (named with the cause).")
    p.add_argument("--site", required=True, help="site name (site-configs/<site>/)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--partition", help="Slurm (or ReFrame) partition; default: the "
                       "site's first Slurm partition")
    which.add_argument("--nodes", help="only these nodes of the partition (Slurm host list, "
                       "e.g. lab-n[1-4])")
    p.add_argument("--gate", metavar="NODE", help="measure NODE against healthy peers before "
                   "it returns to service: exit 0 (yes, a drained NODE is resumed) or 1 (no, "
                   "NODE is drained with the evidence)")
    p.add_argument("--drain", action="store_true", help="drain every named node, with a reason "
                   "naming hpcval and the evidence")
    p.add_argument("--environ", default="impi", help="the site's MPI environment (default impi)")
    p.add_argument("--samples", type=int, default=5, help="samples per figure (default 5)")
    p.add_argument("--max-rounds", type=int, default=7,
                   help="rounds of disjoint pairs (default 7: every node meets 7 peers; all "
                   "pairs of up to 8 nodes)")
    p.add_argument("--follow-up", type=int, default=2,
                   help="rounds re-measuring suspect pairs with fresh peers (default 2)")
    p.add_argument("--confirm", type=int, default=4,
                   help="steps measuring again, beside 4 healthy nodes, the nodes suspected "
                   "on a per-node figure: one per figure and measurement, up to 4 "
                   "measurements when many nodes are suspected (default 4; 0: name on the "
                   "first measurement alone)")
    p.add_argument("--peers", type=int, default=5, help="--gate: healthy peers (default 5)")
    p.add_argument("--min-effect", type=float, default=None,
                   help="smallest relative loss of pair bandwidth that names a node or link "
                   "(default 0.15)")
    p.add_argument("--triad-n", type=int, default=None,
                   help="doubles per triad array (default: each array 4x the node's "
                   "last-level cache); refused past half the memory available per node")
    p.add_argument("--dgemm", action="store_true",
                   help="measure DGEMM on every node too (figure dgemm_gflops; one step more)")
    p.add_argument("--dgemm-n", type=int, default=None,
                   help="--dgemm: matrix order (default: one multiply ~1 s at the node's "
                   "assumed peak, within half the memory available per node)")
    p.add_argument("--quiet", action="store_true", help="no progress lines (the plan is "
                   "still printed)")
    p.set_defaults(func=_vet)


#: The most samples per figure a vetting or the gate takes (the message lengths of
#: one IMB step are written out per sample: 10**9 would fill the disk).
MAX_SAMPLES = 100


def check_args(args: argparse.Namespace) -> None:
    """Wrong input, said before anything is loaded or measured (exit 2)."""
    if not 3 <= args.samples <= MAX_SAMPLES:
        raise InputError(f"--samples {args.samples}: at least 3 (a median of fewer says "
                         f"little), at most {MAX_SAMPLES} (each is a measurement on every "
                         "node and pair); exit 2")
    if args.max_rounds < 1:
        raise InputError(f"--max-rounds {args.max_rounds}: at least 1 round of pairs (all "
                         "pairs of N nodes: N-1); exit 2")
    if args.follow_up < 0:
        raise InputError(f"--follow-up {args.follow_up}: 0 or more rounds; exit 2")
    if args.peers < 1:
        raise InputError(f"--peers {args.peers}: at least 1 healthy peer for --gate; exit 2")
    if args.min_effect is not None and not (math.isfinite(args.min_effect)
                                            and 0 < args.min_effect < 1):
        raise InputError(f"--min-effect {args.min_effect:g}: a relative loss between 0 and 1 "
                         "(default 0.15: 15 % below the median); exit 2")
    if args.triad_n is not None and args.triad_n < 1000:
        raise InputError(f"--triad-n {args.triad_n}: at least 1000 doubles per array; exit 2")
    if args.dgemm_n is not None and (args.dgemm_n < 64 or not args.dgemm):
        raise InputError(f"--dgemm-n {args.dgemm_n}: an order of at least 64, with --dgemm; "
                         "exit 2")
    if args.confirm < 0:
        raise InputError(f"--confirm {args.confirm}: 0 or more steps; exit 2")
    if args.gate is not None:
        check_node_name(args.gate, "--gate")
        for flag, given in (("--drain", args.drain), ("--nodes", args.nodes)):
            if given:
                raise InputError(f"--gate {args.gate} with {flag}: the gate measures NODE "
                                 "with peers it picks and drains NODE itself on no; give "
                                 f"one of --gate and {flag}; exit 2")


def _vet(args: argparse.Namespace) -> int:
    check_args(args)
    site = sitecfg.load(args.site, args.partition, args.environ)

    def progress(msg: str) -> None:
        if not args.quiet:
            print(f"vet: {msg}", file=sys.stderr, flush=True)

    judging = JudgeSettings()
    if args.min_effect is not None:
        judging.min_effect["pingpong_bw_1MiB"] = args.min_effect

    def announce(msg: str) -> None:
        print(f"vet: {msg}", file=sys.stderr, flush=True)

    opts = Options(settings=Settings(samples=args.samples, triad_n=args.triad_n,
                                     dgemm=args.dgemm, dgemm_n=args.dgemm_n),
                   judging=judging,
                   max_rounds=args.max_rounds, follow_up_rounds=args.follow_up,
                   confirm=args.confirm)
    if args.gate:
        ok, result, paths = gate(site, args.gate, opts, progress, peers_wanted=args.peers,
                                  announce=announce)
        print(terminal.text(result), end="")
        print(f"gate {args.gate}: {'YES' if ok else 'NO'}"
              + ("" if ok else f" (drained: {', '.join(result.get('drained', []))})"))
        print(f"results: {paths['text'].parent}")
        return 0 if ok else 1
    result, paths = vet(site, args.nodes, opts, progress, drain=args.drain, announce=announce)
    print(terminal.text(result), end="")
    if result.get("drained"):
        print(f"drained: {', '.join(result['drained'])}")
    print(f"results: {paths['json']}  {paths['html']}")
    if result["unmeasured"]:  # an incomplete vetting is never read as done
        return EXIT_INCOMPLETE
    named = result["verdict"]["culprits"]
    return 1 if named else 0
