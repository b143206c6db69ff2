#!/usr/bin/env bash
# The lab's link delay (docs/lab.md, "A delay on the links") and the lab acceptance of the
# history verdicts with it (docs/judging.md, "On the lab with a delay"). Root; holds the
# lab lock from `lab up` to `lab down`.
#
#   sudo bench/lab_delay.sh latency VAR_DIR [DELAY ...]
#   sudo bench/lab_delay.sh verdicts VAR_DIR [K] [CLEAN] [DELAY] [RATE]
#   sudo bench/lab_delay.sh cut VAR_DIR [K] [CLEAN] [CUT] [RATE] [EVERY]
#
# latency: a 2-node lab, unshaped; for each DELAY (default: 0 50us 200us) three launches
#   through Slurm of IMB PingPong between the nodes (srun, one rank per node, the lab's
#   Intel MPI settings, 1000 repetitions of 0 and 8 B); prints IMB's t[usec] of 8 B per launch,
#   and 1000 UDP round trips between the nodes (8 B, Python sockets: the delay itself).
# verdicts: a 2-node lab at RATE Mbit/s (default 200); `hpcval validate --site lab` of
#   imb_pingpong_internode_check (5 samples per figure) into VAR_DIR (HPCVAL_VAR): K clean
#   runs make the baseline (default 5); CLEAN clean repeats (default 10), each "quiet" when
#   its history verdicts are exactly the counts line (no REGRESSED, UNSTABLE, IMPROVED,
#   INCONCLUSIVE, WARN or HELD line, counts of pass and no-baseline only), "counts line
#   only" when nothing but the counts line is printed (what a person reads on a clean run:
#   inconclusive figures are counted in it); one run with DELAY (default 50us) on every
#   link; then one clean run; then `hpcval history`.
# cut: as verdicts, but the background load changes every EVERY clean runs (default 4: 0,
#   2, 4, 2, 0, ... busy loops added at nice 19, on top of LOAD_PROCS), then the links are cut
#   to CUT per cent of RATE (default 85: a 15 % bandwidth cut) for two runs: is the cut called
#   on its first or second run? Then `hpcval history`. UNTIL=EPOCH: no clean repeat is
#   started after that time (the cut runs still are); the count says how many ran.
#   SPAN=1: the history spans the load: the K baseline runs are made under the same
#   changing load (the clean repeats go on where they left it) and stored unjudged
#   (`validate --record`, which also rewrites the lab site's references.yaml and
#   host-expectations.yaml: run it from a copy of the checkout).
#
# SAMPLES=N: samples per figure per run (default 5, the check's least; the 5-iteration IMB
# latencies of a loaded machine are two-moded, and 5 samples often hold no fast one).
# LOAD_PROCS=N adds N busy loops for the whole script (competing load where the machine is
# idle); the load average is printed beside every run.
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-$here/.venv/bin/python}"
mode="$1"; var="$2"; shift 2
if [ "$(id -u)" != 0 ]; then
    echo "lab_delay.sh: needs root (the lab makes network namespaces)" >&2; exit 3
fi
mkdir -p "$var"
export HPCVAL_VAR="$var"  # validate stores here; lab fabric checks this store's site lock
hpcval() { "$py" -m hpcval.cli "$@"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

exec 9>/tmp/hpcval-lab.lock
flock -w 3600 9
busy=()
quiet_runs=0 only_runs=0  # clean repeats that were quiet, that printed only the counts line
cleanup() {
    for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null; done
    hpcval lab down >/dev/null 2>&1 || true
}
trap cleanup EXIT
for _ in $(seq 1 "${LOAD_PROCS:-0}"); do
    (while :; do :; done) &
    busy+=("$!")
done
echo "== $(date -u +%FT%TZ) $(uptime); ${LOAD_PROCS:-0} busy loop(s) added"

latency() {
    local prefix
    prefix="$("$py" -c 'import sys; print(sys.prefix)')"
    hpcval lab up --nodes 2 --no-file-server >/dev/null
    for delay in "${@:-0 50us 200us}"; do
        # shellcheck disable=SC2086
        for d in $delay; do
            hpcval lab fabric unshaped --delay "$d" >/dev/null || exit 1
            for i in 1 2 3; do
                t=$(env PATH="$prefix/bin:$PATH" LD_LIBRARY_PATH="$prefix/lib" \
                    FI_PROVIDER_PATH="$prefix/lib" \
                    I_MPI_PMI_LIBRARY=/usr/lib/x86_64-linux-gnu/libpmi2.so.0 \
                    I_MPI_FABRICS=shm:ofi FI_PROVIDER=tcp FI_TCP_IFACE=lab0 \
                    I_MPI_HYDRA_IFACE=lab0 I_MPI_WAIT_MODE=1 \
                    srun -N 2 --ntasks-per-node=1 --mpi=pmi2 \
                    IMB-MPI1 PingPong -msglog 3:3 -iter 1000 -time 60 2>&1 |
                    awk '$1 == 8 && NF == 4 {print $3}')
                echo "delay $d launch $i: 8 B t[usec] ${t:-?} (load $(load))"
            done
            udp_rtt "$d"
            hpcval lab status | grep -E "^  delay" || true
        done
    done
}

udp_rtt() {  # the delay itself: 1000 UDP round trips lab-n1 -> lab-n2 -> lab-n1 (8 B)
    ip netns exec hpcval-lab-n2 "$py" -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("198.18.0.12", 5599))
while True:
    d, a = s.recvfrom(64); s.sendto(d, a)' &
    local echo=$!
    sleep 0.5
    ip netns exec hpcval-lab-n1 "$py" -c '
import socket, statistics, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2); r = []
for _ in range(1000):
    t = time.perf_counter_ns(); s.sendto(b"x" * 8, ("198.18.0.12", 5599)); s.recvfrom(64)
    r.append((time.perf_counter_ns() - t) / 1000)
r.sort()
print(f"delay '"$1"' UDP round trip: min {r[0]:.0f} us, median {statistics.median(r):.0f} us, "
      f"90th percentile {r[899]:.0f} us")'
    echo "   (load $(load))"
    kill "$echo"; wait "$echo" 2>/dev/null
}

run_one() {  # run_one NAME PHASE: validate, print its history verdict lines and whether quiet
    local name="$1" phase="$2" log="$var/$1.log" rc lines quiet only
    HPCVAL_VAR="$var" hpcval validate --site lab --tag exp=labdelay --tag "phase=$phase" -- \
        -n imb_pingpong_internode_check -S repetitions=5 -S "samples=${SAMPLES:-5}" >"$log" 2>&1
    rc=$?
    lines="$(grep -E '^ *(REGRESSED|UNSTABLE|IMPROVED|INCONCLUSIVE|WARN|HELD|History verdicts:|hpcval: error)' "$log")"
    quiet=no
    if [ "$(printf '%s\n' "$lines" | wc -l)" = 1 ] &&
        printf '%s\n' "$lines" | grep -qE '^History verdicts: [0-9]+ (pass|no-baseline)(, [0-9]+ (pass|no-baseline))? \('; then
        quiet=yes
    fi
    only=no  # nothing printed but the counts line (inconclusive figures are counted in it)
    if [ "$(printf '%s\n' "$lines" | wc -l)" = 1 ] &&
        printf '%s\n' "$lines" | grep -q '^History verdicts: '; then
        only=yes
    fi
    echo "== $name ($phase): exit $rc, quiet $quiet, counts line only $only, load $(load)," \
        "$(date -u +%TZ)"
    printf '%s\n' "$lines" | sed 's/^/   /'
    [ "$quiet" = yes ] && quiet_runs=$((quiet_runs + 1))
    [ "$only" = yes ] && only_runs=$((only_runs + 1))
}

record_one() {  # record_one NAME: one run stored unjudged (validate --record), its load
    local name="$1" log="$var/$1.log" rc
    HPCVAL_VAR="$var" hpcval validate --site lab --record --tag exp=labdelay \
        --tag phase=baseline -- -n imb_pingpong_internode_check -S repetitions=5 \
        -S "samples=${SAMPLES:-5}" >"$log" 2>&1
    rc=$?
    echo "== $name (recorded): exit $rc, load $(load), $(date -u +%TZ)"
    grep -E '^Recorded:|hpcval: error' "$log" | sed 's/^/   /'
}

lab_at() {  # lab_at RATE: a 2-node lab at RATE Mbit/s
    hpcval lab up --nodes 2 --no-file-server >/dev/null
    hpcval lab fabric "${1}m"
}

baseline() {  # baseline K RATE: a 2-node lab at RATE Mbit/s and K runs for the baseline
    local i
    lab_at "$2"
    for i in $(seq 1 "$1"); do run_one "base-$i" baseline; done
    quiet_runs=0 only_runs=0
}

verdicts() {
    local k="${1:-5}" clean="${2:-10}" delay="${3:-50us}" rate="${4:-200}"
    baseline "$k" "$rate"
    for i in $(seq 1 "$clean"); do run_one "clean-$i" clean; done
    echo "== quiet clean repeats: $quiet_runs of $clean; only the counts line: $only_runs of $clean"
    hpcval lab fabric "${rate}m" --delay "$delay"
    run_one delay delay
    hpcval lab status | grep -E "^lab:|^  delay" || true
    hpcval lab fabric "${rate}m"
    run_one after after-delay
    HPCVAL_VAR="$var" hpcval history --site lab | tail -4
    HPCVAL_VAR="$var" hpcval history --site lab --check imb_pingpong_internode_check \
        --figure lat_8B | tail -4
}

varying=()
set_load() {  # set_load N: exactly N extra busy loops (nice 19) beside LOAD_PROCS
    local pid
    for pid in "${varying[@]}"; do kill "$pid" 2>/dev/null; done
    varying=()
    for _ in $(seq 1 "$1"); do
        nice -n 19 sh -c 'while :; do :; done' &
        varying+=("$!")
    done
}

verdicts_cut() {
    local k="${1:-5}" clean="${2:-20}" cut="${3:-85}" rate="${4:-200}" every="${5:-4}"
    local steps=(0 2 4 2) i n=0
    trap 'set_load 0; cleanup' EXIT
    step() {  # step NAME: the load of the n-th run of the changing load
        if [ $((n % every)) = 0 ]; then
            set_load "${steps[$(((n / every) % 4))]}"
            echo "== load: ${#varying[@]} busy loop(s) added from $1"
        fi
        n=$((n + 1))
    }
    if [ -n "${SPAN:-}" ]; then
        # the history spans the load: its K runs recorded under the same changing
        # load, stored unjudged as a new site records its first runs
        lab_at "$rate"
        for i in $(seq 1 "$k"); do step "base-$i"; record_one "base-$i"; done
    else
        baseline "$k" "$rate"
    fi
    local ran=0
    for i in $(seq 1 "$clean"); do
        if [ -n "${UNTIL:-}" ] && [ "$(date +%s)" -ge "$UNTIL" ]; then
            echo "== stopped before clean-$i: UNTIL passed"
            break
        fi
        ran=$i
        step "clean-$i"
        run_one "clean-$i" clean
    done
    set_load 0
    echo "== quiet clean repeats: $quiet_runs of $ran; only the counts line: $only_runs of $ran"
    hpcval lab fabric "$((rate * cut / 100))m"
    run_one cut-1 cut
    run_one cut-2 cut
    hpcval lab fabric "${rate}m"
    HPCVAL_VAR="$var" hpcval history --site lab | tail -6
}

case "$mode" in
    latency) latency "$@" ;;
    verdicts) verdicts "$@" ;;
    cut) verdicts_cut "$@" ;;
    *) echo "lab_delay.sh: MODE is latency, verdicts or cut" >&2; exit 2 ;;
esac
echo "== $(date -u +%FT%TZ) $(uptime)"
