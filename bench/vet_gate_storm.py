#!/usr/bin/env python3
"""The node gate in a storm: `hpcval health --drain` as Slurm's HealthCheckProgram,
started by slurmctld on every node of a 16-node lab at once, for several rounds.

    .venv/bin/python bench/vet_gate_storm.py --rounds 5 [--out var/gate-storm.jsonl]
    .venv/bin/python bench/vet_gate_storm.py --table var/gate-storm.jsonl

Takes the lab lock (/tmp/hpcval-lab.lock), brings up a ``--nodes``-node lab with
node views (unshaped links, no file server), vets it once (``hpcval vet --site lab
--max-rounds 1``: the gate's yardstick), throttles ``--throttled``'s CPU cgroup
to ``--cpus`` of one CPU (``hpcval lab inject NODE cpu-throttle``), drains
``--admin`` by hand with ``reason="admin: disk"``, then installs the gate
(``HealthCheckInterval`` ``--interval``, ``HealthCheckNodeState=ANY``: every node
at once each interval) and waits for ``--rounds`` rounds. After each round: each
gate's line and exit, the nodes hpcval drained (its own reasons, from
``scontrol``), the administrator's node. One JSON line per round appended to
``--out``, never overwritten; the lab is always taken down. Needs root.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HPCVAL = [sys.executable, "-m", "hpcval.cli"]


def sh(cmd: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                          cwd=ROOT)


def lines_by_round(log: Path) -> list[list[dict]]:
    """The gate lines grouped into rounds (a round: gates that started within 30 s
    of the round's first)."""
    recs = []
    for ln in (log.read_text().splitlines() if log.exists() else []):
        began, at, node, rc, text = ln.split(" ", 4)
        recs.append({"began": float(began), "at": float(at), "node": node, "exit": int(rc),
                     "line": text})
    rounds: list[list[dict]] = []
    for r in sorted(recs, key=lambda r: r["began"]):
        if rounds and r["began"] - rounds[-1][0]["began"] < 30:
            rounds[-1].append(r)
        else:
            rounds.append([r])
    return rounds


def table(path: Path) -> None:
    print("| round | start (UTC) | load after | gates | OK / NO / not judged | healthy drained "
          "| throttled node | admin's node |")
    print("|---|---|---|---|---|---|---|---|")
    for ln in path.read_text().splitlines():
        r = json.loads(ln)
        said = r["said"]
        print(f"| {r['round']} | {r['start']} | {r['load']:.1f} | {r['gates']} | "
              f"{said.get('OK', 0)} / {said.get('NO', 0)} / {said.get('not', 0)} | "
              f"{', '.join(r['healthy_drained']) or '0'} | {r['throttled']} | {r['admin']} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--interval", type=int, default=100)
    ap.add_argument("--throttled", default="lab-n3")
    ap.add_argument("--cpus", type=float, default=0.25)
    ap.add_argument("--admin", default="lab-n5")
    ap.add_argument("--out", type=Path, default=ROOT / "var/gate-storm.jsonl")
    ap.add_argument("--table", type=Path, metavar="JSONL")
    args = ap.parse_args()
    if args.table:
        table(args.table)
        return 0
    from hpcval.lab.slurm import SLURM_CONF
    from hpcval.vet.healthdrain import read_nodes

    lock = open("/tmp/hpcval-lab.lock", "w")  # noqa: SIM115 - held until exit
    fcntl.flock(lock, fcntl.LOCK_EX)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    var = Path(os.environ.get("HPCVAL_VAR", ROOT / "var"))
    work = var / "gate-storm" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    work.mkdir(parents=True)
    log, script = work / "gates.log", work / "hpcval-health"
    names = [f"lab-n{i}" for i in range(1, args.nodes + 1)]
    sh([*HPCVAL, "lab", "down"])
    up = sh([*HPCVAL, "lab", "up", "--nodes", str(args.nodes), "--no-file-server",
             "--node-views"])
    print(f"# lab up: exit {up.returncode}", flush=True)
    conf = SLURM_CONF.read_text() if up.returncode == 0 else None
    try:
        if conf is None:
            print(up.stdout + up.stderr)
            return 3
        vet = sh([*HPCVAL, "vet", "--site", "lab", "--max-rounds", "1", "--quiet"])
        print(f"# yardstick vetting: exit {vet.returncode}; {vet.stdout.strip()[-300:]}",
              flush=True)
        inj = sh([*HPCVAL, "lab", "inject", args.throttled, "cpu-throttle", "--cpus",
                  str(args.cpus)])
        print(f"# {args.throttled} at {args.cpus} CPU: exit {inj.returncode} "
              f"{inj.stdout.strip()}{inj.stderr.strip()}", flush=True)
        sh(["scontrol", "update", f"nodename={args.admin}", "state=drain",
            "reason=admin: disk"])
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in
                       (("HPCVAL_VAR", str(var)), ("PYTHONPATH", os.environ.get(
                           "PYTHONPATH", str(ROOT / "src")))))
        script.write_text(f"""#!/bin/sh
# run by slurmd as root, no arguments; slurmd kills it after 60 s
began=$(date +%s.%N)
out=$({env} {shlex.join(HPCVAL)} health --site lab --drain --samples 3 --budget 50 2>&1)
rc=$?
echo "$began $(date +%s.%N) $(hostname) $rc $(echo "$out" | tr '\\n' ' ')" >> {log}
""")
        script.chmod(0o755)
        SLURM_CONF.write_text(conf + f"HealthCheckProgram={script}\nHealthCheckInterval="
                              f"{args.interval}\nHealthCheckNodeState=ANY\n")
        sh(["scontrol", "reconfigure"])
        t0 = time.monotonic()
        done = 0
        while done < args.rounds and time.monotonic() - t0 < (args.rounds + 2) * args.interval:
            time.sleep(5)
            rounds = lines_by_round(log)
            complete = [r for r in rounds if len(r) >= args.nodes]
            if len(complete) <= done:
                continue
            r = complete[done]
            done += 1
            nodes = read_nodes()
            said: dict[str, int] = {}
            for g in r:
                word = g["line"].split()[2] if len(g["line"].split()) > 2 else "?"
                said[word] = said.get(word, 0) + 1
            mine = next((g for g in r if g["node"] == args.throttled), None)
            adm = nodes.get(args.admin)
            rec = {"round": done, "start": time.strftime("%H:%M:%S", time.gmtime(
                       min(g["began"] for g in r))),
                   "load": os.getloadavg()[0], "gates": len(r), "said": said,
                   "healthy_drained": sorted(n for n in names if n != args.throttled
                                             and nodes.get(n) and nodes[n].own),
                   "throttled": ("drained" if nodes.get(args.throttled)
                                 and nodes[args.throttled].own else "not drained")
                   + f": {mine['line'][:220] if mine else 'no line'}",
                   "admin": (f"drained, {adm.reason!r}" if adm and adm.drained else
                             f"NOT drained: {adm}"),
                   "lines": r, "cpus": args.cpus, "nodes": args.nodes}
            with args.out.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            print(f"# round {done}: {said}, healthy drained {rec['healthy_drained']}, "
                  f"{rec['throttled'][:160]}, admin {rec['admin']}", flush=True)
    finally:
        if conf is not None:
            SLURM_CONF.write_text(conf)
            sh(["scontrol", "reconfigure"])
        sh([*HPCVAL, "lab", "down"])
        lock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
