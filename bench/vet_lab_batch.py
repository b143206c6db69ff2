"""A batch of ``hpcval vet`` runs back to back on one lab hold, with a fault spec.

    .venv/bin/python bench/vet_lab_batch.py --case clean --runs 5 --busy 4
    .venv/bin/python bench/vet_lab_batch.py --case link80 --runs 5
    .venv/bin/python bench/vet_lab_batch.py --case node-link --runs 4
    .venv/bin/python bench/vet_lab_batch.py --table var/vet-lab-batch.jsonl

Takes the lab lock (``/tmp/hpcval-lab.lock``, waits for it), brings up a
``--nodes``-node lab at ``--fabric`` (no file server), shapes the fault of
``--case`` and runs up to ``--runs`` vettings (``hpcval vet --site lab
--quiet``, results in the checkout's ``var/``, kept; the code's commit
recorded), then takes the lab down and releases the lock. It starts no
vetting that would end after ``--hold`` seconds from taking the lock
(default 1500: the lab is shared; a vetting is assumed to take as long as
the longest one so far, at least 300 s).

Cases (16 nodes at 50m):

- ``clean``: every link alike; every name is a healthy node named.
- ``link80``: ``lab-n3``'s link at 80 % of the rate (40m); expected: node lab-n3.
- ``node-link``: ``lab-n3`` at 40m and the traffic of one pair of the plan's
  first round without lab-n3 at half the rate (25m); expected: node lab-n3
  and that link.

``--busy N`` starts N busy loops (``nice -n 19``) for the whole hold, so the
machine carries a steady background load of at least N runnable processes
whatever else runs; they are ended by their process ids at the end.

To keep the code fixed while the checkout changes, run it from an export of
a commit (``git archive``) with ``PYTHONPATH`` on its ``src``, its ``.venv``
linked to the checkout's, ``HPCVAL_VAR`` on the checkout's ``var`` and
``VET_BATCH_COMMIT`` naming the commit.

One Markdown row per vetting on stdout, and one JSON line per vetting appended
to ``--out`` (default ``var/vet-lab-batch.jsonl``): case, start and end (UTC), load
average before and after, seconds, exit, the culprits named, the healthy nodes
named (names outside the expected culprits), the vetting's id. Needs root.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from hpcval.lab import cluster
from hpcval.vet.schedule import plan

LOCK = "/tmp/hpcval-lab.lock"
SLOW = "lab-n3"
CASES = ("clean", "link80", "node-link")


def load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def latest(var: Path, before: set[str]) -> dict:
    root = var / "lab" / "vet"
    new = sorted(p for p in root.glob("*/vet.json") if p.parent.name not in before) \
        if root.is_dir() else []
    return json.loads(new[-1].read_text()) if new else {}


def vet_once(repo: Path, var: Path) -> dict:
    root = var / "lab" / "vet"
    before = {p.name for p in root.iterdir()} if root.is_dir() else set()
    la0, t0 = load1(), time.monotonic()
    proc = subprocess.run([str(repo / ".venv/bin/hpcval"), "vet", "--site", "lab", "--quiet"],
                          capture_output=True, text=True, cwd=repo, check=False)
    return {"rc": proc.returncode, "seconds": round(time.monotonic() - t0, 1),
            "load_before": la0, "load_after": load1(), "result": latest(var, before),
            "tail": (proc.stdout + proc.stderr)[-1500:]}


def expected(case: str, link: tuple[str, str]) -> set[str]:
    if case == "clean":
        return set()
    if case == "link80":
        return {f"node {SLOW}"}
    return {f"node {SLOW}", f"link {link[0]}<->{link[1]}"}


def judge(r: dict, want: set[str]) -> dict:
    verdict = r["result"].get("verdict", {})
    culprits = [f"{c['kind']} {c['name']}" for c in verdict.get("culprits", [])]
    allowed: set[str] = set()
    for w in want:
        allowed.update(w.split(" ", 1)[1].split("<->"))
    healthy = [n for n in verdict.get("named_nodes", []) if n not in allowed]
    return {"culprits": culprits, "healthy_named": healthy,
            "as_expected": set(culprits) == want and not healthy}


def table(path: Path) -> None:
    """The recorded vettings as one Markdown table, and a line per case and code."""
    recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    print("| batch | run | code | case | nodes | start (UTC) | load before / after | seconds "
          "| exit | named | healthy named | id |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in recs:
        print(f"| {r['batch']} | {r['run']} | {r.get('commit', '-')} | {r['case']} | "
              f"{r['nodes']} | {r['start'][11:16]} | {r['load_before']:.1f} / "
              f"{r['load_after']:.1f} | {r['seconds']:.0f} | {r['exit']} | "
              f"{', '.join(r['culprits']) or '-'} | {', '.join(r['healthy_named']) or '-'} | "
              f"{r['id']} |")
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in recs:
        groups.setdefault((r["case"], r.get("commit", "-")), []).append(r)
    print()
    for (case, commit), rs in groups.items():
        ok_exit = 0 if case == "clean" else 1
        refused = sum(r["id"] == "-" for r in rs)
        rs = [r for r in rs if r["id"] != "-"]
        if not rs:
            print(f"- {case}, code {commit}: no vetting ({refused} refused by hpcval)")
            continue
        print(f"- {case}, code {commit}: {len(rs)} vettings ({refused} refused by hpcval, "
              f"not counted); healthy node named in "
              f"{sum(bool(r['healthy_named']) for r in rs)}; exit {ok_exit} in "
              f"{sum(r['exit'] == ok_exit for r in rs)}; exactly the expected culprits in "
              f"{sum(r['as_expected'] for r in rs)}; load before "
              f"{min(r['load_before'] for r in rs):.1f}-{max(r['load_before'] for r in rs):.1f}"
              f"; {min(r['seconds'] for r in rs):.0f}-{max(r['seconds'] for r in rs):.0f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--table", type=Path, default=None, metavar="JSONL",
                    help="print the recorded vettings of JSONL as a Markdown table and stop")
    ap.add_argument("--case", choices=CASES)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--fabric", default="50m")
    ap.add_argument("--slow-node", default="40m")
    ap.add_argument("--slow-link", default="25m")
    ap.add_argument("--busy", type=int, default=0)
    ap.add_argument("--hold", type=float, default=1500.0)
    ap.add_argument("--until", type=float, default=None, metavar="EPOCH",
                    help="start no vetting that would end after this time (seconds since "
                    "the epoch, e.g. $(date -d 16:40 +%%s))")
    ap.add_argument("--batch", default=time.strftime("%H%M", time.gmtime()))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.table:
        table(args.table)
        return 0
    if args.case is None:
        ap.error("--case is required (or --table)")
    repo = Path(__file__).resolve().parent.parent
    var = Path(os.environ.get("HPCVAL_VAR", repo / "var"))
    out = args.out or var / "vet-lab-batch.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    names = [f"lab-n{i}" for i in range(1, args.nodes + 1)]
    link = next(p for p in plan(names, 7)[0] if SLOW not in p)
    want = expected(args.case, link)
    commit = os.environ.get("VET_BATCH_COMMIT") or subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=repo, capture_output=True, text=True,
        check=False).stdout.strip()
    lock = open(LOCK, "w")  # noqa: SIM115 - held for the whole batch
    fcntl.flock(lock, fcntl.LOCK_EX)
    t_lock = time.monotonic()
    if args.until is not None and time.time() + 300 > args.until:
        print("# no vetting: the lab came free too late for --until")
        lock.close()
        return 0
    busy = [subprocess.Popen(["nice", "-n", "19", "sh", "-c", "while :; do :; done"])
            for _ in range(args.busy)]
    print(f"# batch {args.batch}: {args.case}, {args.nodes} nodes at {args.fabric}, "
          f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"busy loops {args.busy}, code {commit}; "
          f"expected: {', '.join(sorted(want)) or 'nobody'}", flush=True)
    print("| batch | run | case | nodes | load before / after | seconds | exit | named "
          "| healthy named | id |")
    print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    try:
        cluster.down(log=lambda *_: None)
        cluster.up(args.nodes, fabric=args.fabric, log=lambda *_: None, file_server=False)
        if args.case != "clean":
            cluster.set_fabric(args.slow_node, node=SLOW)
        if args.case == "node-link":
            cluster.set_fabric(args.slow_link, link=link)
        longest = 300.0
        for i in range(1, args.runs + 1):
            if time.monotonic() - t_lock + longest + 60 > args.hold:
                print(f"# stopped before run {i}: the hold would pass {args.hold:.0f} s")
                break
            if args.until is not None and time.time() + longest > args.until:
                print(f"# stopped before run {i}: it would end after --until")
                break
            start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            r = vet_once(repo, var)
            longest = max(longest, r["seconds"])
            j = judge(r, want)
            rec = {"batch": args.batch, "run": i, "case": args.case, "nodes": args.nodes,
                   "start": start, "end": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "busy": args.busy, "commit": commit, "load_before": r["load_before"],
                   "load_after": r["load_after"], "seconds": r["seconds"], "exit": r["rc"],
                   **j, "id": r["result"].get("id", "-")}
            with out.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            print(f"| {args.batch} | {i} | {args.case} | {args.nodes} | {r['load_before']:.1f}"
                  f" / {r['load_after']:.1f} | {r['seconds']:.0f} | {r['rc']} | "
                  f"{', '.join(j['culprits']) or '-'} | {', '.join(j['healthy_named']) or '-'}"
                  f" | {rec['id']} |", flush=True)
            if r["rc"] > 1:
                print("#   " + r["tail"].replace("\n", "\n#   "), flush=True)
            if r["rc"] in (2, 3) and not r["result"]:
                print(f"# stopped after run {i}: hpcval refused to vet (exit {r['rc']}); the "
                      "next runs would too", flush=True)
                break
    finally:
        cluster.down(log=lambda *_: None)
        for p in busy:
            p.kill()
            p.wait()
        lock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
