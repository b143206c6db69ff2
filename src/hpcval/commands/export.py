"""``hpcval export``: a stored run in the OpenMetrics text format."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hpcval.core.fileio import atomic_write, output_file
from hpcval.history.store import Store
from hpcval.reporting.export import openmetrics
from hpcval.site import Site


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export", help="write a stored run's figures and verdicts as OpenMetrics text",
        description="Write the figures, verdicts and provenance of a stored run (default: the "
        "site's latest) in the OpenMetrics text format, for Prometheus, a Pushgateway or "
        "node_exporter's textfile collector (docs/scheduling.md). With -o the file is "
        "replaced atomically, so a collector never reads half of it.")
    p.add_argument("--site", default="local")
    p.add_argument("--run", metavar="RUN_ID", help="a stored run (default: the latest)")
    p.add_argument("-o", "--output", type=Path, metavar="FILE",
                   help="write to FILE (e.g. /var/lib/node_exporter/textfile/hpcval.prom) "
                   "instead of standard output")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    site = Site.load(args.site)
    if args.output is not None:
        args.output = output_file(args.output, "-o")
    text = openmetrics(Store(site.history_db), args.run)
    if args.output is None:
        sys.stdout.write(text)
    else:
        write_readable(args.output, text)
    return 0


def write_readable(path: Path, text: str) -> None:
    """Replace ``path`` atomically with a file others may read (mode 0644 less
    the umask): node_exporter usually runs as its own user. The temporary
    file's name ends in ``.tmp``, which the textfile collector (``*.prom``)
    never reads."""
    atomic_write(path, text, "writing the OpenMetrics export", mode=0o644)
