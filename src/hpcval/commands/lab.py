"""``hpcval lab``: a Slurm cluster of network namespaces on this machine."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from hpcval.lab import cluster, nodeview
from hpcval.lab.delay import delay_text, parse_delay
from hpcval.lab.fabric import PROFILES
from hpcval.lab.layout import NODE_IFACE
from hpcval.lab.system import LabError
from hpcval.run.labguard import reshaping


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "lab",
        help="run a multi-node Slurm lab on this machine (needs root)",
        description="A real Slurm cluster on one machine: one slurmd per network namespace, "
        "joined by a bridge in 198.18.0.0/15, links shaped by fabric profiles.",
    )
    sub = p.add_subparsers(dest="lab_command", metavar="ACTION")
    sub.required = True

    up = sub.add_parser("up", help="create the lab and wait until all nodes are idle")
    up.add_argument("--nodes", type=int, default=2, help="number of nodes (default 2)")
    up.add_argument("--fabric", default="unshaped", type=_profile, metavar="PROFILE",
                    help=f"fabric profile of the links: {', '.join(PROFILES)} or a rate in "
                    "Mbit/s such as 200m (default unshaped)")
    up.add_argument("--delay", type=_delay, default=0, metavar="TIME",
                    help="delay every packet a node sends on its link, e.g. 50us (where the "
                    "kernel has no netem: NFQUEUE and a delay daemon per node; docs/lab.md)")
    up.add_argument("--service-node", action="store_true",
                    help="also create node lab-svc in partition 'service' (1 CPU) for jobs "
                    "that drive others, e.g. scheduled validation (docs/scheduling.md)")
    up.add_argument("--file-server", action=argparse.BooleanOptionalAction, default=None,
                    help="file server lab-fs serving a directory over sshfs, mounted at the "
                    "same path on every node (default: when sshfs and openssh-server are "
                    "installed)")
    up.add_argument("--node-views", action="store_true",
                    help="every compute node's slurmd in a mount namespace of its own, with "
                    "its own /proc/cmdline, /proc/meminfo, DMI, EDAC and InfiniBand files and "
                    "CPU cgroup, for 'lab inject' (docs/lab.md)")
    up.set_defaults(func=_up)

    down = sub.add_parser("down", help="stop the lab's daemons and remove everything it added")
    down.set_defaults(func=_down)

    st = sub.add_parser("status", help="show nodes, daemons and fabric; exit 1 if unhealthy")
    st.add_argument("--json", action="store_true", help="machine-readable output")
    st.set_defaults(func=_status)

    fab = sub.add_parser("fabric", help="switch the links of a running lab to a profile")
    fab.add_argument("profile", nargs="?", type=_profile, metavar="PROFILE",
                     help=f"profile to apply: {', '.join(PROFILES)}, or a rate in Mbit/s such "
                     "as 200m; without it, list profiles and the current one")
    where = fab.add_mutually_exclusive_group()
    where.add_argument("--node", metavar="NODE",
                       help="shape only this compute node's link (e.g. lab-n3: one slow NIC); "
                       "the other links keep their profile")
    where.add_argument("--link", metavar="A,B",
                       help="shape only the traffic between nodes A and B (e.g. "
                       "lab-n2,lab-n5: one slow cable); their other traffic keeps its profile")
    fab.add_argument("--delay", type=_delay, default=None, metavar="TIME",
                     help="delay every packet each node sends on its link by TIME, e.g. 50us "
                     "or 0.2ms (0: none); with a PROFILE, or alone to keep the rates. A "
                     "PROFILE for every link without --delay removes the delay")
    fab.add_argument("--force", action="store_true",
                     help="reshape even while a validation or a Slurm job uses the lab (its "
                     "figures then span two fabrics); without it that exits 3")
    fab.set_defaults(func=_fabric)

    inj = sub.add_parser("inject", help="inject a fault into one node's view (needs "
                         "'up --node-views'); without arguments, list the faults")
    inj.add_argument("node", nargs="?", metavar="NODE", help="compute node, e.g. lab-n3")
    inj.add_argument("fault", nargs="?", metavar="FAULT", help="fault to inject (see the list)")
    inj.add_argument("--count", type=int, default=None, metavar="N",
                     help="for the counter faults: raise the counter by N")
    inj.add_argument("--cpus", type=float, default=None, metavar="X",
                     help="for cpu-throttle: the quota in CPUs (default half the node's share "
                     "of the machine's CPUs; on a busy machine a node gets less than that "
                     "share anyway, so a lower quota is needed to bind)")
    inj.set_defaults(func=_inject)

    clr = sub.add_parser("clear", help="undo the faults injected into a node's view")
    clr.add_argument("node", metavar="NODE", help="compute node, e.g. lab-n3, or 'all'")
    clr.add_argument("--reset-counters", action="store_true",
                     help="also set the error counters back to 0 (as a reboot would); by "
                     "default they keep their values and stop rising")
    clr.set_defaults(func=_clear)

    views = sub.add_parser("views", help="show each node's injected faults")
    views.add_argument("--refresh", action="store_true",
                       help="first rewrite every node's /proc/meminfo from the machine's "
                       "(its MemTotal fault kept)")
    views.set_defaults(func=_views)


def _up(args: argparse.Namespace) -> int:
    layout = cluster.up(args.nodes, fabric=args.fabric, service=args.service_node,
                        file_server=args.file_server, delay_us=args.delay,
                        node_views=args.node_views)
    shared = (f"\nshared file system (sshfs from lab-fs {layout.file_server.address}) on every "
              f"node at {layout.shared_dir}" if layout.file_server_enabled else "")
    delay = f", delay {delay_text(args.delay)}" if args.delay else ""
    print(
        f"""
lab is up: {args.nodes} node(s) {layout.nodelist}, partition 'lab', fabric '{args.fabric}'{delay}
  sinfo                                   # nodes should be idle
  srun -N {args.nodes} hostname                      # one line per node
  hpcval validate --site lab -- --tag internode    # inter-node checks through Slurm
  hpcval lab fabric 1g                    # shape the links to 1 Gbit/s
  hpcval lab status
  hpcval lab down                         # remove everything again
MPI over TCP: FI_PROVIDER=tcp FI_TCP_IFACE={NODE_IFACE} (see docs/lab.md)""" + shared
    )
    return 0


def _down(args: argparse.Namespace) -> int:
    cluster.down()
    return 0


def _status(args: argparse.Namespace) -> int:
    st = cluster.status()
    if args.json:
        print(json.dumps(asdict(st), indent=2))
        return 0 if st.up and not st.problems else 1
    if not st.up and not st.nodes:
        print(f"lab: down (no state file {st.state_file})")
        return 1
    shaped = "".join(f", {n} '{p}'" for n, p in st.node_fabric.items())
    delay = f", delay {st.delay} on every link" if st.delay != "none" else ""
    print(f"lab: {'up' if st.up else 'NOT READY'}, fabric '{st.fabric}'{shaped}{delay}")
    for key, text in st.daemons.items():
        print(f"  {key:<18} {text}")
    print(f"  {'node':<8} {'address':<14} {'slurm':<10} {'rx MB':>10} {'tx MB':>10}  qdisc")
    for n in st.nodes:
        print(f"  {n.name:<8} {n.address:<14} {n.slurm_state:<10} "
              f"{n.rx_bytes / 1e6:>10.1f} {n.tx_bytes / 1e6:>10.1f}  {n.qdisc}")
    fs = st.fileserver
    if fs is not None:
        print(f"  {'lab-fs':<8} {fs.address:<14} {'(server)':<10} "
              f"{fs.rx_bytes / 1e6:>10.1f} {fs.tx_bytes / 1e6:>10.1f}  {fs.qdisc}")
        print(f"  file server: sshd {fs.sshd}, serves {fs.export}")
        for node, text in fs.mounts.items():
            print(f"    {node:<8} {fs.mount}: {text}")
    if st.node_views:
        faulty = [f"{n} {', '.join(f)}" for n, f in st.node_views.items() if f]
        print(f"  node views: {'; '.join(faulty) or 'no fault injected'}")
    for node, text in st.delay_nodes.items():
        print(f"  delay {st.delay} {node:<8} {text}")
    for problem in st.problems:
        print(f"  problem: {problem}")
    return 0 if st.up and not st.problems else 1


def _profile(text: str) -> str:
    """A fabric profile the lab takes: a named one or a rate such as ``200m``
    (:func:`hpcval.lab.fabric.get_profile`); else argparse's error, exit 2."""
    from hpcval.lab.fabric import get_profile

    try:
        get_profile(text)
    except LabError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _delay(text: str) -> int:
    """A delay such as ``50us`` (:func:`hpcval.lab.delay.parse_delay`), in
    microseconds; else argparse's error, exit 2."""
    try:
        return parse_delay(text)
    except LabError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _fabric(args: argparse.Namespace) -> int:
    if args.profile is None and args.delay is None:
        current = cluster.current_fabric()
        overrides = cluster.node_fabrics()
        for prof in PROFILES.values():
            mark = "*" if prof.name == current else " "
            nodes = [n for n, p in overrides.items() if p == prof.name]
            extra = f"  ({', '.join(nodes)})" if nodes else ""
            print(f"{mark} {prof.name:<9} {prof.description}{extra}")
        if current is not None:
            print(f"  delay on every link: {cluster.current_delay()}")
        return 0
    if args.delay is not None and (args.node or args.link):
        raise LabError("--delay is for every link: give it without --node/--link")
    link = None
    if args.link:
        ends = args.link.split(",")
        if len(ends) != 2:
            raise LabError(f"--link {args.link}: two nodes separated by a comma, e.g. "
                           "lab-n2,lab-n5")
        link = (ends[0], ends[1])
    with reshaping("lab fabric", force=args.force):
        if args.profile is None:
            name = cluster.set_delay(args.delay)
            print(f"lab: delay on every link is now {name} (rates unchanged)")
            return 0
        prof = cluster.set_fabric(args.profile, node=args.node, link=link,
                                  delay_us=args.delay or 0)
    where = (f"{args.node}'s link" if args.node else
             f"the link {link[0]}<->{link[1]}" if link else "fabric")
    delay = "" if args.node or link else f", delay {delay_text(args.delay or 0)}"
    print(f"lab: {where} is now '{prof.name}' ({prof.description}){delay}")
    return 0


def _inject(args: argparse.Namespace) -> int:
    if args.node is None or args.fault is None:
        if args.node is not None:
            raise LabError(f"lab inject {args.node}: give a FAULT too, one of "
                           f"{', '.join(nodeview.FAULTS)}")
        for name, text in nodeview.FAULTS.items():
            print(f"  {name:<17} {text}")
        return 0
    layout = cluster.views_layout()
    print(nodeview.inject(layout, args.node, args.fault, count=args.count, cpus=args.cpus))
    return 0


def _clear(args: argparse.Namespace) -> int:
    layout = cluster.views_layout()
    nodes = [n.name for n in layout.nodes] if args.node == "all" else [args.node]
    for node in nodes:
        print(nodeview.clear(layout, node, reset_counters=args.reset_counters))
    return 0


def _views(args: argparse.Namespace) -> int:
    layout = cluster.views_layout()
    if args.refresh:
        nodeview.refresh_meminfo(layout)
    for n in layout.nodes:
        faults = nodeview.load_faults(layout, n.name)
        print(f"  {n.name:<8} {', '.join(sorted(faults)) or 'clean'}")
    return 0
