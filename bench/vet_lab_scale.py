"""``hpcval vet`` on a large lab, watched from outside: steps, srun processes, open files.

    flock /tmp/hpcval-lab.lock .venv/bin/python bench/vet_lab_scale.py \
        --nodes 32 --fabric 50m --slow-node 35m --slow-link 25m --runs 3 --clean-runs 3

Brings up a lab of ``--nodes`` nodes at ``--fabric`` (no file server), runs
``--clean-runs`` vettings with every link alike, then shapes one node's link to
``--slow-node`` (``lab-n3``) and the traffic of one node pair to ``--slow-link``
(a pair of the plan's first round that does not hold the slow node, so it is
measured) and runs ``--runs`` vettings; takes the lab down. Each vetting runs
as ``hpcval vet --site lab --quiet`` under ``ulimit -n`` = ``--nofile`` (1024),
with results in a temporary ``HPCVAL_VAR``, watched every 0.2 s from outside:

- srun steps of the vetting's job as Slurm lists them (``squeue --steps``; the
  lab keeps no accounting, so ``sacct`` has nothing) and the highest step id + 1
  (a step shorter than the sampling interval is counted by its id);
- srun processes among the vetting's descendants, and the vetting process's
  open file descriptors (``/proc/PID/fd``), the peaks of both;
- wall time, exit code, the culprits named, the nodes and pairs unmeasured.

One Markdown row per vetting. Needs root.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from hpcval.lab import cluster
from hpcval.vet.schedule import plan

SLOW_NODE = "lab-n3"


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class Watch(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.stop = threading.Event()
        self.peak_srun = 0
        self.peak_fds = 0
        self.steps: set[str] = set()
        self.job = ""

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.peak_fds = max(self.peak_fds, len(os.listdir(f"/proc/{self.pid}/fd")))
            except OSError:
                pass
            self.peak_srun = max(self.peak_srun, sum(comm(p) == "srun"
                                                     for p in descendants(self.pid)))
            if not self.job:
                q = subprocess.run(["squeue", "-h", "-n", "hpcval-vet", "-o", "%i"],
                                   capture_output=True, text=True, check=False)
                self.job = q.stdout.split()[0] if q.stdout.split() else ""
            if self.job:
                q = subprocess.run(["squeue", "-h", "--steps", "-j", self.job, "-o", "%i"],
                                   capture_output=True, text=True, check=False)
                self.steps |= {s for s in q.stdout.split()
                               if s.split(".")[-1].isdigit()}
            time.sleep(0.2)


def vet_once(var: Path, nofile: int, extra: list[str]) -> dict:
    before = set(var.glob("lab/vet/*/vet.json"))
    load = os.getloadavg()[0]

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "hpcval.cli", "vet", "--site", "lab",
                             "--quiet", *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=limit,
                            env={**os.environ, "HPCVAL_VAR": str(var)})
    watch = Watch(proc.pid)
    watch.start()
    out, _ = proc.communicate()
    wall = time.monotonic() - t0
    watch.stop.set()
    watch.join()
    new = sorted(set(var.glob("lab/vet/*/vet.json")) - before)
    result = json.loads(new[-1].read_text()) if new else {}
    ids = [int(s.split(".")[-1]) for s in watch.steps]
    return {"rc": proc.returncode, "wall": wall, "load": load, "result": result,
            "steps_seen": len(watch.steps), "max_step_id": max(ids) if ids else -1,
            "peak_srun": watch.peak_srun, "peak_fds": watch.peak_fds,
            "output": out}


def row(nodes: int, case: str, r: dict) -> str:
    res = r["result"]
    named = ", ".join(f"{c['kind']} {c['name']}" for c in res.get("verdict", {}).get(
        "culprits", [])) or "-"
    lost = ", ".join(u["name"] for u in res.get("unmeasured", [])) or "-"
    return (f"| {nodes} | {case} | {res.get('rounds', '?')}+{res.get('follow_up_rounds', '?')}"
            f" | {res.get('plan', {}).get('steps', '?')} | {res.get('steps', '?')} | "
            f"{r['steps_seen']} (ids 0-{r['max_step_id']}) | {r['peak_srun']} | "
            f"{r['peak_fds']} | {r['wall']:.0f} s | {r['load']:.1f} | exit {r['rc']} | "
            f"{named} | {lost} | {res.get('id', '-')} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--fabric", default="50m")
    ap.add_argument("--slow-node", default="35m")
    ap.add_argument("--slow-link", default="25m")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--clean-runs", type=int, default=3)
    ap.add_argument("--nofile", type=int, default=1024)
    ap.add_argument("--triad-n", type=int, default=None)
    args = ap.parse_args(argv)
    extra = [f"--triad-n={args.triad_n}"] if args.triad_n else []
    names = [f"lab-n{i}" for i in range(1, args.nodes + 1)]
    link = next(p for p in plan(names, 7)[0] if SLOW_NODE not in p)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"# {args.nodes} nodes at {args.fabric}, {now}, {os.cpu_count()} CPUs, "
          f"ulimit -n {args.nofile}; faulty: {SLOW_NODE} at "
          f"{args.slow_node}, link {link[0]}<->{link[1]} at {args.slow_link}")
    print("| nodes | case | rounds | planned steps | steps (hpcval) | steps (squeue) | peak srun "
          "| peak open files | wall | load before | result | named | unmeasured | id |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    cluster.up(args.nodes, fabric=args.fabric, log=lambda *_: None, file_server=False)
    try:
        with tempfile.TemporaryDirectory(prefix="vet-lab-scale-") as tmp:
            var = Path(tmp)
            for _ in range(args.clean_runs):
                r = vet_once(var, args.nofile, extra)
                print(row(args.nodes, "clean", r), flush=True)
                if r["rc"] > 1 and r["rc"] != 4:
                    print(r["output"][-2000:])
            if args.runs:
                cluster.set_fabric(args.slow_node, node=SLOW_NODE)
                cluster.set_fabric(args.slow_link, link=link)
            for _ in range(args.runs):
                r = vet_once(var, args.nofile, extra)
                print(row(args.nodes, f"{SLOW_NODE} {args.slow_node}, "
                          f"{link[0]}<->{link[1]} {args.slow_link}", r), flush=True)
                if r["rc"] > 1 and r["rc"] != 4:
                    print(r["output"][-2000:])
            keep = Path(os.environ.get("VET_LAB_SCALE_KEEP", ""))
            if keep.name:
                subprocess.run(["cp", "-r", str(var / "lab" / "vet"), str(keep)], check=False)
    finally:
        cluster.down(log=lambda *_: None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
