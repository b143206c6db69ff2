#!/usr/bin/env bash
# First contact (docs/performance.md): N fresh clones of this checkout, each running the
# README's `make validate` (venv set up from pip, whose cache may be warm), one after the
# other. One tab-separated line per clone on stdout and in OUT:
#   clone  start(UTC)  wall_s  setup_s  load1_start  load1_end  exit  result_line
# The result line is the RESULT line hpcval prints (PASS/FAIL/... with its counts).
#
#   bench/first_contact.sh [N [OUT.tsv]]      # default 20, /tmp/first-contact.tsv
# Run it on an otherwise idle machine: the figure it is for is the idle wall time.
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-20}"
out="${2:-/tmp/first-contact.tsv}"
printf 'clone\tstart\twall_s\tsetup_s\tload1_start\tload1_end\texit\tresult\n' | tee "$out"
for i in $(seq 1 "$n"); do
    d="$(mktemp -d /tmp/first-contact.XXXXXX)"
    git clone -q "$here" "$d/main"
    [ -e "$here/../shared" ] && ln -s "$(cd "$here/../shared" && pwd)" "$d/shared"
    start="$(date -u +%FT%TZ)"
    l0="$(cut -d' ' -f1 /proc/loadavg)"
    t0="$(date +%s.%N)"
    (cd "$d/main" && make setup >"$d/setup.log" 2>&1)
    t1="$(date +%s.%N)"
    (cd "$d/main" && make validate >"$d/validate.log" 2>&1)
    rc=$?
    t2="$(date +%s.%N)"
    l1="$(cut -d' ' -f1 /proc/loadavg)"
    result="$(grep -m1 -E '^RESULT:' "$d/validate.log" || echo 'no RESULT line')"
    printf '%s\t%s\t%.0f\t%.0f\t%s\t%s\t%s\t%s\n' "$i" "$start" \
        "$(echo "$t2 - $t0" | bc)" "$(echo "$t1 - $t0" | bc)" "$l0" "$l1" "$rc" "$result" \
        | tee -a "$out"
    # keep the logs of a run that did not pass; remove the rest
    if [ "$rc" != 0 ] || ! grep -q '^RESULT: PASS' "$d/validate.log"; then
        echo "kept: $d" >&2
    else
        rm -rf "$d"
    fi
done
