"""``hpcval lab``: a Slurm cluster of network namespaces on this machine."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from hpcval.lab import cluster
from hpcval.lab.fabric import PROFILES
from hpcval.lab.layout import NODE_IFACE
from hpcval.lab.system import LabError


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
    up.add_argument("--service-node", action="store_true",
                    help="also create node lab-svc in partition 'service' (1 CPU) for jobs "
                    "that drive others, e.g. scheduled validation (docs/scheduling.md)")
    up.add_argument("--file-server", action=argparse.BooleanOptionalAction, default=None,
                    help="file server lab-fs serving a directory over sshfs, mounted at the "
                    "same path on every node (default: when sshfs and openssh-server are "
                    "installed)")
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
    fab.set_defaults(func=_fabric)


def _up(args: argparse.Namespace) -> int:
    layout = cluster.up(args.nodes, fabric=args.fabric, service=args.service_node,
                        file_server=args.file_server)
    shared = (f"\nshared file system (sshfs from lab-fs {layout.file_server.address}) on every "
              f"node at {layout.shared_dir}" if layout.file_server_enabled else "")
    print(
        f"""
lab is up: {args.nodes} node(s) {layout.nodelist}, partition 'lab', fabric '{args.fabric}'
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
    print(f"lab: {'up' if st.up else 'NOT READY'}, fabric '{st.fabric}'{shaped}")
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
    for problem in st.problems:
        print(f"  problem: {problem}")
    return 0 if st.up and not st.problems else 1


def _profile(text: str) -> str:
    """A fabric profile the lab takes: a named one or a rate such as ``200m``
    (:func:`hpcval.lab.fabric.get_profile`); else argparse's error, exit 2."""
    from hpcval.lab.fabric import get_profile
    from hpcval.lab.system import LabError

    try:
        get_profile(text)
    except LabError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _fabric(args: argparse.Namespace) -> int:
    if args.profile is None:
        current = cluster.current_fabric()
        overrides = cluster.node_fabrics()
        for prof in PROFILES.values():
            mark = "*" if prof.name == current else " "
            nodes = [n for n, p in overrides.items() if p == prof.name]
            extra = f"  ({', '.join(nodes)})" if nodes else ""
            print(f"{mark} {prof.name:<9} {prof.description}{extra}")
        return 0
    link = None
    if args.link:
        ends = args.link.split(",")
        if len(ends) != 2:
            raise LabError(f"--link {args.link}: two nodes separated by a comma, e.g. "
                           "lab-n2,lab-n5")
        link = (ends[0], ends[1])
    prof = cluster.set_fabric(args.profile, node=args.node, link=link)
    where = (f"{args.node}'s link" if args.node else
             f"the link {link[0]}<->{link[1]}" if link else "fabric")
    print(f"lab: {where} is now '{prof.name}' ({prof.description})")
    return 0
