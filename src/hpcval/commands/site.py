"""``hpcval site``: make a new site, list the sites, show one."""

from __future__ import annotations

import argparse

from hpcval.core.paths import project_root
from hpcval.node.gpus import read_query
from hpcval.site import Site, known_sites
from hpcval.site.scaffold import new_site


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("site", help="make a new site, list sites, show a site's files")
    ssub = p.add_subparsers(dest="action", metavar="ACTION")
    ssub.required = True
    n = ssub.add_parser(
        "new", help="scaffold a site from what this machine shows",
        description="Write site-configs/NAME/ (config.py, judging.yaml) and "
        "environments/NAME/spack.yaml from the detected scheduler (Slurm partitions from "
        "sinfo, else the local scheduler), launcher and MPI stacks. Then run "
        "`hpcval validate --site NAME --record` to measure references and host expectations.")
    n.add_argument("name")
    n.add_argument("--scheduler", choices=["auto", "local", "slurm"], default="auto")
    n.add_argument("--gpus-csv", metavar="FILE",
                   help="a node's GPUs from a saved `nvidia-smi --query-gpu=index,name,"
                   "memory.total,pci.bus_id,compute_cap --format=csv` instead of asking this "
                   "machine's nvidia-smi (docs/adding-a-gpu-partition.md)")
    n.add_argument("--gpu-partition", metavar="NAME", action="append", default=[],
                   help="Slurm partition whose nodes have the --gpus-csv GPUs (repeatable)")
    n.set_defaults(func=_new)
    ls = ssub.add_parser("list", help="the sites of this checkout")
    ls.set_defaults(func=_list)
    show = ssub.add_parser("show", help="where a site's files and results are")
    show.add_argument("name")
    show.set_defaults(func=_show)


def _new(args: argparse.Namespace) -> int:
    gpus = read_query(args.gpus_csv) if args.gpus_csv else "detect"
    for path in new_site(args.name, scheduler=args.scheduler, gpus=gpus,
                         gpu_partitions=tuple(args.gpu_partition)):
        print(f"wrote {path}")
    print(f"next: hpcval validate --site {args.name} --record   (measures and writes "
          "references.yaml and host-expectations.yaml; review them, then validate as usual)")
    return 0


def _list(args: argparse.Namespace) -> int:
    for name in known_sites(project_root()):
        print(name)
    return 0


def _show(args: argparse.Namespace) -> int:
    site = Site.load(args.name)
    for label, path in (("config", site.config), ("references", site.references),
                        ("host expectations", site.host_expectations),
                        ("judging", site.judging), ("MPI tuning", site.tuning),
                        ("Spack environment", site.spack_env), ("results", site.var)):
        print(f"{label:18} {path}{'' if path.exists() else '  (missing)'}")
    return 0
