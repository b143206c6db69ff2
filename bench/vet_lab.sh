#!/bin/sh
# `hpcval vet` on the lab: detections over repeated runs, and cost per lab size.
#
#   bench/vet_lab.sh detect FABRIC SLOW_PROFILE RUNS [NODES]   e.g.  detect 1g 100m 5 6
#       NODES-node lab (default 6) at FABRIC, lab-n3's link at SLOW_PROFILE ("none": all
#       healthy); RUNS vettings; one line per run: exit code, named nodes, wall time.
#   bench/vet_lab.sh gate
#       6-node lab at 1g, lab-n3 at 100m: vet --drain, gate lab-n3 (still slow: no),
#       lab-n3 back at 1g, gate lab-n3 again (yes: resumed).
#   bench/vet_lab.sh scaling [FABRIC]                            (default 1g)
#       2, 4, 6 and 8 nodes, one vetting each: rounds, jobs, srun steps, wall time, CPU.
#
# Takes the lab lock (/tmp/hpcval-lab.lock) for the whole experiment and brings the lab
# down afterwards; set HPCVAL_LAB_LOCKED=1 when the caller holds the lock already.
# Needs root. CPU: user+sys of hpcval and its srun clients (GNU time), and busy CPU
# seconds of the whole machine during the vetting (/proc/stat; includes other work).
set -eu
cd "$(dirname "$0")/.."
HPCVAL=${HPCVAL:-.venv/bin/hpcval}
PY=${PY:-.venv/bin/python}
if [ "${HPCVAL_LAB_LOCKED:-0}" != 1 ]; then
    exec env HPCVAL_LAB_LOCKED=1 flock -w 3600 /tmp/hpcval-lab.lock "$0" "$@"
fi
trap '$HPCVAL lab down >/dev/null 2>&1 || true' EXIT

summary() {  # $1 = time output file, $2 = exit code
    latest=$(ls -td var/lab/vet/*/ | head -1)
    $PY - "$latest/vet.json" "$1" "$2" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
t = dict(line.strip().split("=", 1) for line in open(sys.argv[2]) if "=" in line)
cpu = float(t["user"]) + float(t["sys"])
named = ",".join(r["verdict"]["named_nodes"]) or "-"
print(f"| {len(r['verdict']['nodes'])} | {r['rounds']}+{r['follow_up_rounds']} | {r['jobs']} "
      f"| {r['steps']} | {r['wall_seconds']:.0f} s | {cpu:.1f} s | "
      f"{r['cpu_seconds_machine']:.0f} s | {r['loadavg_before'][0]:.1f} | exit {sys.argv[3]} "
      f"| {named} | {r['id']} |")
PYEOF
}

vet_once() {
    rc=0
    /usr/bin/time -f 'user=%U\nsys=%S\nwall=%e' -o /tmp/vet-lab-time.$$ \
        $HPCVAL vet --site lab --quiet "$@" > /tmp/vet-lab-out.$$ 2>&1 || rc=$?
    if [ "$rc" -gt 1 ]; then cat /tmp/vet-lab-out.$$; fi
    summary /tmp/vet-lab-time.$$ "$rc"
    rm -f /tmp/vet-lab-time.$$ /tmp/vet-lab-out.$$
}

header() {
    echo "| nodes | rounds | jobs | srun steps | wall | CPU hpcval+srun | CPU machine | load before | result | named | id |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
}

case "${1:-}" in
detect)
    fabric=$2 slow=$3 runs=$4 nodes=${5:-6}
    $HPCVAL lab down >/dev/null 2>&1 || true
    $HPCVAL lab up --nodes "$nodes" --fabric "$fabric" --no-file-server >/dev/null
    [ "$slow" = none ] || $HPCVAL lab fabric "$slow" --node lab-n3 >/dev/null
    echo "# $nodes nodes at $fabric, lab-n3 at $slow, $(date -u +%FT%TZ), $(nproc) CPUs"
    header
    i=0
    while [ "$i" -lt "$runs" ]; do vet_once; i=$((i + 1)); done
    ;;
gate)
    $HPCVAL lab down >/dev/null 2>&1 || true
    $HPCVAL lab up --nodes 6 --fabric 1g --no-file-server >/dev/null
    $HPCVAL lab fabric 100m --node lab-n3 >/dev/null
    echo "# gate, $(date -u +%FT%TZ)"
    rc=0; $HPCVAL vet --site lab --quiet --drain | grep -E "^  (node|link|switch) |drained" || rc=$?
    sinfo -h -N -o '%N %T %E' | grep lab-n3
    for link in 100m 1g; do
        $HPCVAL lab fabric "$link" --node lab-n3 >/dev/null
        rc=0; $HPCVAL vet --site lab --quiet --gate lab-n3 > /tmp/vet-gate.$$ 2>&1 || rc=$?
        grep -E "^  (node|link|switch) |^gate|error" /tmp/vet-gate.$$; rm -f /tmp/vet-gate.$$
        echo "lab-n3 link $link: gate exit $rc; now: $(sinfo -h -N -o '%N %T %E' | grep lab-n3)"
    done
    ;;
scaling)
    fabric=${2:-1g}
    echo "# scaling at $fabric, $(date -u +%FT%TZ), $(nproc) CPUs"
    header
    for n in 2 4 6 8; do
        $HPCVAL lab down >/dev/null 2>&1 || true
        $HPCVAL lab up --nodes "$n" --fabric "$fabric" --no-file-server >/dev/null
        vet_once
        $HPCVAL lab down >/dev/null
    done
    ;;
*)
    sed -n '2,14p' "$0"; exit 2 ;;
esac
