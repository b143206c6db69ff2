#!/usr/bin/env python3
"""Node faults on the lab: does `hpcval vet` name the faulty node alone, with its
code, and `hpcval health` on that node within 60 s?

Brings up a lab with node views (`hpcval lab up --node-views`), then runs cases:

* ``clean``: nothing injected; every vetting should name nobody.
* one fault (``hpcval lab inject``) on one node: ``cmdline``, ``dimm``,
  ``hca-firmware``, ``cpu-throttle`` are injected once before the vettings;
  the counter faults ``ib-symbol-errors``, ``ecc-corrected``,
  ``ecc-uncorrected`` are raised before each vetting (a rate since the node's
  previous stored vetting: the vetting before is the record), the uncorrected
  one by 1 each time;
* ``pair:F1@N1+F2@N2``: two faults on two nodes at once.

Each case: ``--vets`` vettings (default 3), then (``--health``) `hpcval health`
through `srun -w NODE` on each faulty node (a counter raised once more before
it), killed at 60 s. Faults are cleared after each case (counters keep their
values and stop rising). One JSON line per vetting and per health run is
appended to ``--out`` (never overwritten): case, faulty nodes, nodes named,
codes per node, exit, seconds, load. ``--table FILE`` prints the Markdown table
of such a file instead of running anything.

Takes the lab lock (/tmp/hpcval-lab.lock; HPCVAL_LAB_LOCKED=1 if the caller
holds it), stops starting cases after ``--max-minutes`` (default 24) and always
takes the lab down. Needs root.

    .venv/bin/python bench/vet_node_faults.py --nodes 8 --out var/node-faults.jsonl \\
        --cases clean,cmdline@lab-n3,dimm@lab-n5 [--vet-args "--max-rounds 2"]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HPCVAL = str(ROOT / ".venv/bin/hpcval")
COUNTERS = {"ib-symbol-errors", "ecc-corrected", "ecc-uncorrected"}
ALL_CASES = ("clean,cmdline@lab-n2,dimm@lab-n3,hca-firmware@lab-n4,ib-symbol-errors@lab-n5,"
             "ecc-corrected@lab-n6,ecc-uncorrected@lab-n7,cpu-throttle@lab-n8,"
             "pair:cmdline@lab-n2+ecc-corrected@lab-n5,pair:dimm@lab-n3+cpu-throttle@lab-n6,"
             "pair:hca-firmware@lab-n4+ib-symbol-errors@lab-n7")


def sh(cmd: list[str], timeout: float = 900) -> tuple[int, str, float]:
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                           cwd=ROOT)
        rc, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as err:
        rc, out = 124, f"killed after {timeout:.0f} s: {err.stdout or ''}"
    return rc, out, time.monotonic() - t0


def parse_case(text: str) -> list[tuple[str, str]]:
    """``clean`` -> []; ``F@N`` -> [(F, N)]; ``pair:F1@N1+F2@N2`` -> two."""
    if text == "clean":
        return []
    body = text.removeprefix("pair:")
    out = []
    for part in body.split("+"):
        fault, _, node = part.partition("@")
        if not node:
            raise SystemExit(f"--cases: '{part}' is not FAULT@NODE (e.g. dimm@lab-n3)")
        out.append((fault, node))
    return out


def codes_by_node(doc: object, found: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """Every ``{"code": ..., "node": ...}`` anywhere in a vet/health JSON document."""
    found = {} if found is None else found
    if isinstance(doc, dict):
        code, node = doc.get("code"), doc.get("node") or doc.get("name")
        if isinstance(code, str) and isinstance(node, str):
            found.setdefault(node, set()).add(code)
        for v in doc.values():
            codes_by_node(v, found)
    elif isinstance(doc, list):
        for v in doc:
            codes_by_node(v, found)
    return found


def newest(d: Path, after: float, pattern: str) -> Path | None:
    files = [p for p in d.glob(pattern) if p.stat().st_mtime >= after]
    return max(files, key=lambda p: p.stat().st_mtime) if files else None


def vet_once(args: argparse.Namespace) -> dict:
    sh([HPCVAL, "lab", "views", "--refresh"])
    load = os.getloadavg()[0]
    t0 = time.time()
    rc, out, secs = sh([HPCVAL, "vet", "--site", "lab", "--quiet",
                        *shlex.split(args.vet_args)])
    vdir = newest(ROOT / "var/lab/vet", t0, "*/vet.json")
    rec: dict = {"kind": "vet", "exit": rc, "seconds": round(secs, 1), "load": round(load, 1)}
    if vdir is None:
        rec.update(named=[], codes={}, error=out.strip().splitlines()[-3:])
        return rec
    doc = json.loads(vdir.read_text())
    rec["id"] = doc.get("id", vdir.parent.name)
    rec["named"] = doc.get("verdict", {}).get("named_nodes", [])
    rec["codes"] = {n: sorted(c) for n, c in codes_by_node(doc).items()}
    return rec


def health_once(node: str) -> dict:
    load = os.getloadavg()[0]
    t0 = time.time()
    rc, out, secs = sh(["srun", "-N1", "-w", node, HPCVAL, "health", "--site", "lab",
                        "--node", node, "--budget", "50"], timeout=60)
    line = next((ln for ln in out.splitlines() if ln.startswith("health ")), out.strip()[-300:])
    rec = {"kind": "health", "node": node, "exit": rc, "seconds": round(secs, 1),
           "load": round(load, 1), "line": line}
    hfile = newest(ROOT / "var/lab/health", t0, f"*-{node}.json")
    if hfile is not None:
        rec["codes"] = {n: sorted(c) for n, c in codes_by_node(json.loads(hfile.read_text()))
                        .items()}
    return rec


def line_codes(line: str) -> list[str]:
    """The ``[HC-...]`` codes a health line names."""
    return sorted(set(re.findall(r"\[(HC-[A-Z0-9-]+)\]", line)))


def run_case(case: str, args: argparse.Namespace, out: Path) -> None:
    faults = parse_case(case)
    for fault, node in faults:
        if fault not in COUNTERS:
            cpus = (["--cpus", str(args.throttle_cpus)]
                    if fault == "cpu-throttle" and args.throttle_cpus else [])
            sh([HPCVAL, "lab", "inject", node, fault, *cpus])
    for i in range(1, args.vets + 1):
        for fault, node in faults:
            if fault in COUNTERS:
                sh([HPCVAL, "lab", "inject", node, fault])
        rec = vet_once(args)
        rec.update(case=case, faulty=sorted({n for _, n in faults}), vetting=i,
                   nodes=args.nodes, at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        print(json.dumps(rec), flush=True)
        with out.open("a") as f:
            f.write(json.dumps(rec) + "\n")
    if args.health:
        for fault, node in faults:
            if fault in COUNTERS:
                sh([HPCVAL, "lab", "inject", node, fault])
        for node in sorted({n for _, n in faults}):
            rec = health_once(node)
            rec.update(case=case, faulty=sorted({n for _, n in faults}), nodes=args.nodes,
                       at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            print(json.dumps(rec), flush=True)
            with out.open("a") as f:
                f.write(json.dumps(rec) + "\n")
    sh([HPCVAL, "lab", "clear", "all"])


def table(path: Path) -> None:
    rows = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    # a vetting the bench's own stop interrupted (SIGINT: exit -2) measured nothing
    rows = [r for r in rows if r["exit"] >= 0]
    print("| case | nodes | run | faulty | named | codes | exit | seconds | "
          "load | id / line |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["kind"] == "vet":
            codes = "; ".join(f"{n}: {', '.join(c)}" for n, c in sorted(r["codes"].items()))
        else:  # what the line names (the record also keeps findings it did not act on)
            codes = ", ".join(line_codes(r.get("line", "")))
        codes = codes or "-"
        if r["kind"] == "vet":
            vj = ROOT / "var/lab/vet" / str(r.get("id")) / "vet.json"
            culprits = (json.loads(vj.read_text())["verdict"]["culprits"] if vj.exists()
                        else [])
            if culprits:
                given = all(c.get("remedy") for c in culprits)
                codes += " (remedy " + ("given" if given else "MISSING") + ")"
        run = f"vet {r['vetting']}" if r["kind"] == "vet" else "health"
        if r["kind"] == "vet":
            named = ", ".join(r.get("named", [])) or "-"
        else:  # health judges the node it runs on: exit 1 names it
            if r["exit"] == 1:
                named = r["node"]
            elif line_codes(r.get("line", "")):  # a suspect finding: in the line, not drained
                named = f"{r['node']} (in the line, exit {r['exit']})"
            else:
                named = f"- ({r['node']} not named)"
        tail = r.get("id", "") if r["kind"] == "vet" else r.get("line", "")[:160]
        print(f"| {r['case']} | {r['nodes']} | {run} | {', '.join(r['faulty']) or '-'} | "
              f"{named} | {codes} | {r['exit']} | {r['seconds']} | {r['load']} | "
              f"{tail.replace('|', '/')} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--fabric", default="1g")
    ap.add_argument("--cases", default=ALL_CASES)
    ap.add_argument("--vets", type=int, default=3)
    ap.add_argument("--vet-args", default="", help="more arguments of 'hpcval vet'")
    ap.add_argument("--health", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--out", type=Path, default=ROOT / "var/node-faults.jsonl")
    ap.add_argument("--max-minutes", type=float, default=24.0)
    ap.add_argument("--throttle-cpus", type=float, default=None, metavar="X",
                    help="the cpu-throttle quota in CPUs (default: half the node's share)")
    ap.add_argument("--skip-done", action="store_true",
                    help="skip the cases --out already holds --vets vettings of")
    ap.add_argument("--table", type=Path, metavar="FILE", help="print FILE's Markdown table")
    args = ap.parse_args()
    if args.table:
        table(args.table)
        return 0
    cases = args.cases.split(",")
    for c in cases:
        parse_case(c)
    if args.skip_done and args.out.exists():
        done = [json.loads(ln) for ln in args.out.read_text().splitlines() if ln.strip()]
        cases = [c for c in cases
                 if sum(r["kind"] == "vet" and r["case"] == c for r in done) < args.vets]
    if os.environ.get("HPCVAL_LAB_LOCKED") != "1":
        lock = open("/tmp/hpcval-lab.lock", "w")  # noqa: SIM115 - held until exit
        fcntl.flock(lock, fcntl.LOCK_EX)
    start = time.monotonic()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    sh([HPCVAL, "lab", "down"])
    rc, out, secs = sh([HPCVAL, "lab", "up", "--nodes", str(args.nodes), "--fabric", args.fabric,
                        "--no-file-server", "--node-views"])
    print(f"# lab up --nodes {args.nodes} --node-views: exit {rc} in {secs:.1f} s", flush=True)
    try:
        if rc != 0:
            print(out)
            return 3
        vet_minutes = 1.5  # until measured: the longest vetting so far
        for case in cases:
            spent = (time.monotonic() - start) / 60
            faulty = len({n for _, n in parse_case(case)})
            case_minutes = vet_minutes * args.vets + (faulty if args.health else 0)
            if spent + case_minutes > args.max_minutes:
                print(f"# stopped before {case}: {spent:.1f} min spent, it would take "
                      f"{case_minutes:.1f} min, limit {args.max_minutes} min", flush=True)
                break
            run_case(case, args, args.out)
            secs = [json.loads(ln)["seconds"] for ln in args.out.read_text().splitlines()
                    if '"kind": "vet"' in ln]
            vet_minutes = max(secs) / 60 + 0.1 if secs else vet_minutes
    finally:
        sh([HPCVAL, "lab", "down"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
