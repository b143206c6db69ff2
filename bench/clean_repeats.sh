#!/usr/bin/env bash
# Clean repeats (docs/judging.md, "What a clean run prints"): N validations of the same
# cases, one after the other, into a private results store; from the (K+1)-th on each is
# judged against its history. One tab-separated line per run on stdout and in OUT:
#   run  start(UTC)  wall_s  load1  exit  loud_lines  counts_line
# loud_lines counts the verdict lines above the counts line (REGRESSED, UNSTABLE,
# IMPROVED, WARN, INCONCLUSIVE, HELD): a clean run prints none, only the counts line.
#
#   bench/clean_repeats.sh [N [SITE [OUT.tsv]]] [-- validate options]
#   bench/clean_repeats.sh 15 local                 # 5 runs of baseline, 10 judged
#   HPCVAL_VAR=/tmp/v bench/clean_repeats.sh 15 lab -- -n imb_pingpong_internode_check
# The store is $HPCVAL_VAR (default: a new temporary directory), never var/.
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
hpcval="${HPCVAL:-$here/.venv/bin/hpcval}"
n=15; site=local; out=/tmp/clean-repeats.tsv
for v in n site out; do
    if [ $# -gt 0 ] && [ "$1" != -- ]; then printf -v "$v" '%s' "$1"; shift; fi
done
[ "${1:-}" = -- ] && shift
export HPCVAL_VAR="${HPCVAL_VAR:-$(mktemp -d /tmp/clean-repeats-var.XXXXXX)}"
echo "# store: $HPCVAL_VAR; site $site; validate options: $*" >&2
printf 'run\tstart\twall_s\tload1\texit\tloud_lines\tcounts_line\n' | tee "$out"
for i in $(seq 1 "$n"); do
    log="$HPCVAL_VAR/clean-repeat-$i.log"
    start="$(date -u +%FT%TZ)"
    t0="$(date +%s.%N)"
    "$hpcval" validate --site "$site" ${1+-- "$@"} >"$log" 2>&1
    rc=$?
    t1="$(date +%s.%N)"
    loud="$(grep -cE '^\s*(REGRESSED|UNSTABLE|IMPROVED|WARN|INCONCLUSIVE|HELD)\b' "$log")"
    counts="$(grep -m1 '^History verdicts:' "$log" || echo 'no counts line')"
    printf '%s\t%s\t%.0f\t%s\t%s\t%s\t%s\n' "$i" "$start" "$(echo "$t1 - $t0" | bc)" \
        "$(cut -d' ' -f1 /proc/loadavg)" "$rc" "$loud" "$counts" | tee -a "$out"
done
