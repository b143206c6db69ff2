#!/bin/sh
# DGEMM in `hpcval vet` on the lab: one node's CPU throttled by a CFS quota, RUNS vettings.
#
#   bench/vet_dgemm_throttle.sh MODE RUNS [NODES] [NODE]    e.g.  throttled 3 6 lab-n3
#       MODE throttled: NODE's slurmd (and so every task it starts) in a cgroup whose CPU
#       quota is half the node's fair share of the machine (the lab's nodes share its
#       CPUs: NODES nodes on C CPUs get C/NODES each when all run, so the quota is
#       C/NODES/2 of a CPU); MODE clean: no quota. RUNS vettings with --dgemm; one line
#       per run: exit code, named nodes and on which figures, the DGEMM medians, load.
#       QUOTA_US=N sets the quota (per 100 ms period) instead: e.g. half of the share a
#       node was measured to get in clean vettings at the machine's load.
#
# Takes the lab lock (/tmp/hpcval-lab.lock) for the whole experiment, removes the cgroup
# and brings the lab down afterwards. Needs root and the cgroup v1 `cpu` controller
# (/sys/fs/cgroup/cpu) or cgroup v2 (cpu.max).
set -eu
cd "$(dirname "$0")/.."
HPCVAL=${HPCVAL:-.venv/bin/hpcval}
PY=${PY:-.venv/bin/python}
if [ "${HPCVAL_LAB_LOCKED:-0}" != 1 ]; then
    exec env HPCVAL_LAB_LOCKED=1 flock -w 1800 /tmp/hpcval-lab.lock "$0" "$@"
fi
mode=$1 runs=$2 nodes=${3:-6} node=${4:-lab-n3}
state=${HPCVAL_LAB_STATE:-/run/hpcval-lab}
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    cg=/sys/fs/cgroup/hpcval-lab-throttle root=/sys/fs/cgroup
else
    cg=/sys/fs/cgroup/cpu/hpcval-lab-throttle root=/sys/fs/cgroup/cpu
fi
cleanup() {
    if [ -d "$cg" ]; then
        for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do echo "$p" > "$root/cgroup.procs" || true; done
        rmdir "$cg" 2>/dev/null || true
    fi
    $HPCVAL lab down >/dev/null 2>&1 || true
}
trap cleanup EXIT

$HPCVAL lab down >/dev/null 2>&1 || true
$HPCVAL lab up --nodes "$nodes" --no-file-server >/dev/null
cpus=$($PY -c 'import os; print(len(os.sched_getaffinity(0)))')
period=100000
quota=${QUOTA_US:-$((period * cpus / nodes / 2))}
if [ "$mode" = throttled ]; then
    mkdir -p "$cg"
    if [ -f "$cg/cpu.max" ]; then echo "$quota $period" > "$cg/cpu.max"
    else echo $period > "$cg/cpu.cfs_period_us"; echo $quota > "$cg/cpu.cfs_quota_us"; fi
    cat "$state/slurmd-$node.pid" > "$cg/cgroup.procs"
    echo "$node: slurmd $(cat "$state/slurmd-$node.pid") in $cg, quota $quota us per $period us" \
         "($(echo "$quota $period" | awk '{printf "%.3f", $1/$2}') CPU; fair share $cpus/$nodes CPU)"
fi
echo "| run | mode | load before | exit | named (figures) | DGEMM $node / others' median (GFLOP/s) | wall | id |"
echo "|---|---|---|---|---|---|---|---|"
i=1
while [ "$i" -le "$runs" ]; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(date +%s)
    rc=0
    $HPCVAL vet --site lab --quiet --dgemm ${DGEMM_ARGS:-} > /tmp/vet-dgemm-out.$$ 2>&1 || rc=$?
    [ "$rc" -le 1 ] || tail -5 /tmp/vet-dgemm-out.$$
    latest=$(ls -td var/lab/vet/*/ | head -1)
    $PY - "$latest/vet.json" "$node" "$i" "$mode" "$load" "$rc" "$(( $(date +%s) - t0 ))" <<'PYEOF'
import json, statistics, sys
path, node, i, mode, load, rc, wall = sys.argv[1:]
r = json.load(open(path))
named = {}
for c in r["verdict"]["culprits"]:
    named.setdefault(c["name"], []).append(c["figure"])
shown = "; ".join(f"{n} ({', '.join(f)})" for n, f in named.items()) or "-"
d = r["node_samples"].get("dgemm_gflops", {})
best = {n: statistics.median(v) for n, v in d.items() if v}
others = statistics.median([v for n, v in best.items() if n != node]) if len(best) > 1 else 0
mine = f"{best[node]:.2f}" if node in best else "unmeasured"
print(f"| {i} | {mode} | {load} | {rc} | {shown} | {mine} / {others:.2f} | {wall} s | {r['id']} |")
PYEOF
    i=$((i + 1))
done
rm -f /tmp/vet-dgemm-out.$$
