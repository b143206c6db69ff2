#!/usr/bin/env bash
# What hpcval costs on top of ReFrame, and ReFrame on top of the bare benchmark.
#
#   bench/overhead.sh [RUNS [RUNS20]]   (default 5 rounds for 2 cases, 3 for 20)
#
# The same IMB PingPong test cases (imb_pingpong_check, warm and cold, 5 runs of
# IMB each, -S repetitions=10) three ways, for 2 and 20 cases (20 = --repeat 10):
#   bare     the job scripts ReFrame writes (a --dry-run), run one after another
#            with bash: the MPI launches alone
#   reframe  reframe -C site-configs/local/config.py -c reframe-checks -r ...
#   hpcval   hpcval validate --site local -- ...
# Modes alternate within a round so that load from other users hits all three
# alike; each figure is the median over the rounds. Then it times the parts of
# `hpcval validate` outside ReFrame. Results go to a temporary store (HPCVAL_VAR),
# never to the checkout's var/.
set -euo pipefail

# OVERHEAD_ROOT: measure another checkout (e.g. an older one, for before/after)
ROOT=${OVERHEAD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=$ROOT/.venv/bin
RUNS=${1:-5}
RUNS20=${2:-3}
WORK=$(mktemp -d /tmp/hpcval-overhead.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export HPCVAL_ROOT=$ROOT HPCVAL_VAR=$WORK/var HPCVAL_SPACK=0
cd "$ROOT"

SELECT=(-p impi -n imb_pingpong_check -S repetitions=10)

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
    for script in "$WORK"/scripts-"$1"/*/rfm_job.sh; do
        (cd "$(dirname "$script")" && bash rfm_job.sh)
    done
}

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs);" \
     "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ)"
printf '%-6s %8s %8s %8s %14s %14s %16s\n' cases bare reframe hpcval reframe-bare \
       hpcval-reframe "hpcval/case"
for cases in 2 20; do
    repeat=()
    [ "$cases" -gt 2 ] && repeat=(--repeat $((cases / 2)))
    # the job scripts ReFrame would run, copied out of its stage directory
    "$BIN/reframe" -C site-configs/local/config.py -c reframe-checks "${SELECT[@]}" \
        "${repeat[@]}" --dry-run >/dev/null 2>&1
    mkdir -p "$WORK/scripts-$cases"
    n=0
    for stage in $(find "$HPCVAL_VAR/local/stage" -name rfm_job.sh -printf '%h\n'); do
        n=$((n + 1)); cp -r "$stage" "$WORK/scripts-$cases/case$n"
    done
    rm -rf "$HPCVAL_VAR/local/stage"
    [ "$n" -eq "$cases" ] || { echo "dry run wrote $n job scripts, $cases expected" >&2; exit 3; }
    b=() r=() h=()
    rounds=$RUNS
    [ "$cases" -gt 2 ] && rounds=$RUNS20
    for _ in $(seq "$rounds"); do
        b+=("$(seconds bare "$cases")")
        r+=("$(seconds "$BIN/reframe" -C site-configs/local/config.py -c reframe-checks \
                 "${SELECT[@]}" "${repeat[@]}" -r)")
        h+=("$(seconds "$BIN/hpcval" validate --site local -- "${SELECT[@]}" "${repeat[@]}")")
    done
    mb=$(echo "${b[@]}" | median); mr=$(echo "${r[@]}" | median); mh=$(echo "${h[@]}" | median)
    printf '%-6s %8s %8s %8s %14.2f %14.2f %16.3f\n' "$cases" "$mb" "$mr" "$mh" \
        "$(echo "$mr - $mb" | bc -l)" "$(echo "$mh - $mr" | bc -l)" \
        "$(echo "($mh - $mr) / $cases" | bc -l)"
done

echo
echo "hpcval validate outside ReFrame (median of $RUNS, last run's report):"
"$BIN/python" - "$RUNS" <<'PY'
import statistics
import subprocess
import sys
import time
from pathlib import Path

runs = int(sys.argv[1])
bin_dir = Path(sys.executable).parent


def median_of(fn):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cold(code):
    return lambda: subprocess.run([sys.executable, "-c", code], check=True)


from hpcval import runner  # noqa: E402
from hpcval.paths import var_dir  # noqa: E402

report = sorted((var_dir("local") / "reports").glob("run-report-*.json"))[-1]
parts = {
    "python start-up alone": cold("pass"),
    "import the CLI and build its parser (`hpcval --help` path)":
        lambda: subprocess.run([str(bin_dir / "hpcval"), "--help"], check=True,
                               capture_output=True),
    "validate the site's references (runner.check_site_references)":
        lambda: runner.check_site_references("local"),
    "verdict table + HTML report of a run (runner.publish)":
        lambda: runner.publish(report, "local", out=open("/dev/null", "w")),
}
for name, fn in parts.items():
    print(f"  {median_of(fn):6.3f} s  {name}")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
