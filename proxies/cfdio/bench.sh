#!/bin/sh
# Measure the cfdio proxy against its yardsticks on this machine:
#   stencil memory bandwidth vs the triad kernel (same binary, --mode triad),
#   result-file write bandwidth vs dd with conv=fsync on the same directory.
# Usage: bench.sh [DIR] [RANKS]   (cfdio and mpirun on PATH)
set -eu
DIR=${1:-${TMPDIR:-/tmp}}
NP=${2:-1}
command -v cfdio >/dev/null || { echo "bench.sh: cfdio not on PATH" >&2; exit 2; }
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -n) $(nproc) cores, dir=$DIR ranks=$NP"
mpirun -n "$NP" cfdio --mode triad | grep '^CFDIO'
for s in gather-to-root mpiio per-rank-then-gather; do
    mpirun -n "$NP" cfdio --local 128 128 128 --steps 20 --every 10 \
        --strategy "$s" --dir "$DIR" | grep '^CFDIO'
done
f="$DIR/bench_dd.$$"
dd if=/dev/zero of="$f" bs=1M count=16 conv=fsync 2>&1 | tail -1
rm -f "$f"
