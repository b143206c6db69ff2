#!/usr/bin/env bash
# What hpcval costs on top of ReFrame, and ReFrame on top of the bare benchmark.
#
#   bench/overhead.sh [RUNS [RUNS20]]   (default 5 rounds for 2 cases, 3 for 20)
#
# The same IMB PingPong test cases (imb_pingpong_check, warm and cold, cut to one
# IMB run of one repetition per size, -S samples=1 -S repetitions=1, so that the
# benchmark's own time, and its noise on a shared machine, does not hide the
# overhead) three ways, for 2 and 20 cases (20 = --repeat 10):
#   bare     the job scripts ReFrame writes (a --dry-run), run one after another
#            with bash: the MPI launches alone
#   reframe  reframe -C site-configs/local/config.py -c reframe-checks -r ...
#   hpcval   hpcval validate --site local -- ...
# Modes alternate within a round so that load from other users hits all three
# alike; each figure is the median over the rounds. Before measuring, 7 runs of
# the same cases are stored (OVERHEAD_SEED; 0 measures a new site without
# history), so every measured run is judged against a baseline and a history
# long enough for change points, as in service. Then it times the parts of
# `hpcval validate` outside ReFrame. Results go to a temporary store (HPCVAL_VAR),
# never to the checkout's var/.
set -euo pipefail

# OVERHEAD_ROOT: measure another checkout (e.g. an older one, for before/after)
ROOT=${OVERHEAD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=$ROOT/.venv/bin
RUNS=${1:-5}
RUNS20=${2:-3}
SEED=${OVERHEAD_SEED:-7}  # stored runs before the measured ones (0: a new site)
WORK=$(mktemp -d /tmp/hpcval-overhead.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export HPCVAL_ROOT=$ROOT HPCVAL_VAR=$WORK/var HPCVAL_SPACK=0
cd "$ROOT"

SELECT=(-p impi -n imb_pingpong_check -S samples=1 -S repetitions=1)

seconds() {  # wall seconds of a command, its output discarded
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || true
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}

median() { tr ' ' '\n' | sort -g | awk '{v[NR]=$1} END {
    if (NR % 2) printf "%.2f", v[(NR+1)/2]; else printf "%.2f", (v[NR/2]+v[NR/2+1])/2 }'; }

bare() {  # run every job script of the dry run in its own stage directory
    local script
    while read -r script; do
        (cd "$(dirname "$script")" && bash rfm_job.sh </dev/null) \
            || { echo "bare: $script failed" >&2; exit 3; }
    done < "$WORK/scripts-$1"
}

seconds_bare() {  # as seconds, but a failing job script stops the benchmark
    local t0 t1
    t0=$(date +%s.%N)
    bare "$1" >/dev/null 2>&1 || { echo "bare: a job script of the $1-case dry run failed" >&2; exit 3; }
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs);" \
     "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ)"
declare -A over
printf '%-6s %8s %8s %8s %14s %14s %16s\n' cases bare reframe hpcval reframe-bare \
       hpcval-reframe "hpcval/case"
for cases in 2 20; do
    repeat=()
    [ "$cases" -gt 2 ] && repeat=(--repeat $((cases / 2)))
    # the job scripts ReFrame would run, left in the dry run's own store (they
    # name their stage directory by its absolute path)
    HPCVAL_VAR=$WORK/dry-$cases "$BIN/reframe" -C site-configs/local/config.py \
        -c reframe-checks "${SELECT[@]}" "${repeat[@]}" --dry-run >/dev/null 2>&1
    find "$WORK/dry-$cases/local/stage" -name rfm_job.sh > "$WORK/scripts-$cases"
    n=$(wc -l < "$WORK/scripts-$cases")
    [ "$n" -eq "$cases" ] || { echo "dry run wrote $n job scripts, $cases expected" >&2; exit 3; }
    # a site in service: every measured run is judged against a baseline of
    # K = 5 accepted runs and its history is long enough for change points
    for _ in $(seq "$SEED"); do
        "$BIN/hpcval" validate --site local -- "${SELECT[@]}" "${repeat[@]}" >/dev/null 2>&1 || true
    done
    b=() r=() h=()
    rounds=$RUNS
    [ "$cases" -gt 2 ] && rounds=$RUNS20
    for _ in $(seq "$rounds"); do
        t=$(seconds_bare "$cases"); b+=("$t")
        r+=("$(seconds "$BIN/reframe" -C site-configs/local/config.py -c reframe-checks \
                 "${SELECT[@]}" "${repeat[@]}" -r)")
        h+=("$(seconds "$BIN/hpcval" validate --site local -- "${SELECT[@]}" "${repeat[@]}")")
    done
    mb=$(echo "${b[@]}" | median); mr=$(echo "${r[@]}" | median); mh=$(echo "${h[@]}" | median)
    printf '%-6s %8s %8s %8s %14.2f %14.2f %16.3f\n' "$cases" "$mb" "$mr" "$mh" \
        "$(echo "$mr - $mb" | bc -l)" "$(echo "$mh - $mr" | bc -l)" \
        "$(echo "($mh - $mr) / $cases" | bc -l)"
    over[$cases]=$(echo "$mh - $mr" | bc -l)
done
printf 'hpcval over reframe: %.2f s per validation (fixed) + %.3f s per case (marginal)\n' \
    "$(echo "${over[2]} - 2 * (${over[20]} - ${over[2]}) / 18" | bc -l)" \
    "$(echo "(${over[20]} - ${over[2]}) / 18" | bc -l)"

echo
echo "where hpcval validate spends its time outside ReFrame (cProfile of one 20-case run):"
"$BIN/python" -m cProfile -o "$WORK/validate.prof" "$BIN/hpcval" validate --site local -- \
    "${SELECT[@]}" --repeat 10 >/dev/null 2>&1 || true
"$BIN/python" - "$WORK/validate.prof" <<'PY'
import pstats
import sys

stats = pstats.Stats(sys.argv[1])
total = stats.total_tt
rows = {}
for (path, _line, name), (_cc, _nc, _tt, cum, _callers) in stats.stats.items():
    for label, (mod, fn) in {
        "reframe itself (subprocess, waited for)": ("hpcval/run/runner.py", "run_reframe"),
        "site and references checks": ("hpcval/site.py", "check_files"),
        "preflight (store writable, disk space)": ("hpcval/run/storecheck.py", "_preflight"),
        "store the run and judge it": ("hpcval/run/verdicts.py", "store_and_judge"),
        "verdict table and HTML report": ("hpcval/run/runner.py", "publish"),
        "import of the CLI and its commands": ("hpcval/cli.py", "build_parser"),
    }.items():
        if path.endswith(mod) and name == fn:
            rows[label] = rows.get(label, 0.0) + cum
for label, cum in rows.items():
    print(f"  {cum:7.3f} s  {label}")
outside = total - rows.get("reframe itself (subprocess, waited for)", 0.0)
print(f"  {total:7.3f} s  whole run in the hpcval process; outside ReFrame: {outside:.3f} s"
      " (imports before main() are not in the profile)")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
