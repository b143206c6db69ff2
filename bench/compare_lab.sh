#!/usr/bin/env bash
# A/B on the real lab (docs/compare.md): IMB PingPong between two lab nodes, runs of
# side A and side B interleaved (ABAB...), each run validated with --tag so that
# `hpcval compare tag:... tag:...` finds them. Root; holds the lab lock from up to down.
#
#   sudo bench/compare_lab.sh VAR_DIR EXPERIMENT RATE_A RATE_B [RUNS_PER_SIDE]
#   sudo bench/compare_lab.sh /var/tmp/ab ab20 200 160 5    # links 20 % slower on side B
#   sudo bench/compare_lab.sh /var/tmp/ab aa 200 200 5      # the same rate on both sides
#
# Runs are stored in VAR_DIR (HPCVAL_VAR) with tags exp=EXPERIMENT, side=A|B and
# rate=<Mbit/s>; then e.g.
#   HPCVAL_VAR=VAR_DIR hpcval compare tag:exp=ab20,side=A tag:exp=ab20,side=B --site lab
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-$here/.venv/bin/python}"
var="$1"; exp="$2"; rate_a="$3"; rate_b="$4"; runs="${5:-5}"
if [ "$(id -u)" != 0 ]; then
    echo "compare_lab.sh: needs root (the lab makes network namespaces)" >&2; exit 3
fi
mkdir -p "$var"
exec 9>/tmp/hpcval-lab.lock
flock -w 3600 9
trap '"$py" -m hpcval.cli lab down >/dev/null 2>&1 || true' EXIT
uptime
"$py" -m hpcval.cli lab up --nodes 2 --no-file-server
for i in $(seq 1 "$runs"); do
    for side in A B; do
        rate="$rate_a"; [ "$side" = B ] && rate="$rate_b"
        # the command refuses (exit 3) while anything still runs on the lab
        "$py" -m hpcval.cli lab fabric "${rate}m" >/dev/null
        echo "== run $i side $side: ${rate} Mbit/s, load $(cut -d' ' -f1-3 /proc/loadavg)"
        HPCVAL_VAR="$var" "$py" -m hpcval.cli validate --site lab --tag "exp=$exp" \
            --tag "side=$side" --tag "rate=$rate" -- -n imb_pingpong_internode_check \
            -S repetitions=5 > "$var/$exp-$i-$side.log" 2>&1 || true
        grep -E "^(History verdicts|hpcval: error)" "$var/$exp-$i-$side.log" || tail -3 "$var/$exp-$i-$side.log"
    done
done
uptime
