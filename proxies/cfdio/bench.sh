#!/bin/sh
# Measure the cfdio proxy against its yardsticks on this machine (docs/performance.md):
#   stencil memory bandwidth vs the triad kernel, same binary, same ranks, one run
#     (a 256x256x128 grid: two 64 MiB fields, beyond the caches);
#   result-file write bandwidth (gather-to-root, mpiio, per-rank-then-gather; 128^3
#     doubles per rank = 16 MiB per rank and output, fsync included) vs dd with
#     conv=fsync writing the same bytes per output to the same directory.
# Each measurement runs REPS times (default 3); compare the best of each.
# Usage: bench.sh [DIR] [RANKS] [REPS]   (cfdio and mpirun on PATH)
set -eu
DIR=${1:-${TMPDIR:-/tmp}}
NP=${2:-1}
REPS=${3:-3}
command -v cfdio >/dev/null || { echo "bench.sh: cfdio not on PATH" >&2; exit 2; }
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -n) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), dir=$DIR ranks=$NP"
i=0
while [ $i -lt "$REPS" ]; do
    mpirun -n "$NP" cfdio --global 256 256 128 --steps 20 --strategy none --with-triad \
        --triad-n 20000000 --reps 5 | grep '^CFDIO'
    for s in gather-to-root mpiio per-rank-then-gather; do
        mpirun -n "$NP" cfdio --local 128 128 128 --steps 20 --every 10 \
            --strategy "$s" --dir "$DIR" | grep '^CFDIO'
    done
    f="$DIR/bench_dd.$$"
    echo "dd $((16 * NP)) MiB fsync: $(dd if=/dev/zero of="$f" bs=1M count=$((16 * NP)) \
        conv=fsync 2>&1 | tail -1)"
    rm -f "$f"
    i=$((i + 1))
done
