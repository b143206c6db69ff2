#!/usr/bin/env bash
# Detection experiment (docs/judging.md): on the lab, >= 20 clean IMB PingPong runs
# and >= 10 runs each on links 3, 5, 10 and 20 % slower, 5 samples per figure per run;
# then the detection tables. Root; takes the lab lock for the whole up..runs..down.
#
#   sudo bench/detection.sh [OUT.json]        # default tests/data/judging/lab-pingpong.json
#   DETECTION_RATE=200 DETECTION_MINUTES=27 sudo bench/detection.sh
#   DETECTION_ARGS="--counts 0:4,10:2 --no-calibrate --seed 15" sudo bench/detection.sh more.json
#   DETECTION_NODES=4 DETECTION_MINUTES=21 DETECTION_ARGS="--pool 4 --slow-pct 10 --load-mean 0 \
#       --load-sd 0 --clean 16 --per-drop 8 --drops 10,20 --seed 22" \
#       sudo bench/detection.sh tests/data/judging/lab-pool.json
# (the last: no competing traffic; each run's pair drawn from 4 nodes, one 10 % slower;
#  evaluate it alone: bench/detection_eval.py tests/data/judging/lab-pool.json)
# (the second form completes an experiment that --minutes cut short; evaluate both
#  files together: bench/detection_eval.py first.json more.json)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-$here/.venv/bin/python}"
hpcval="${HPCVAL:-$here/.venv/bin/hpcval}"
out="${1:-$here/tests/data/judging/lab-pingpong.json}"
rate="${DETECTION_RATE:-200}"
minutes="${DETECTION_MINUTES:-27}"
extra="${DETECTION_ARGS:-}"
nodes="${DETECTION_NODES:-2}"
if [ "$(id -u)" != 0 ]; then
    echo "detection.sh: needs root (the lab makes network namespaces)" >&2; exit 3
fi
mkdir -p "$(dirname "$out")"
lock=/tmp/hpcval-lab.lock
# shellcheck disable=SC2016
flock -w 3600 "$lock" bash -c '
    set -euo pipefail
    py="$1"; hpcval="$2"; out="$3"; rate="$4"; minutes="$5"; here="$6"; extra="$7"; nodes="$8"
    trap "\"$hpcval\" lab down >/dev/null 2>&1 || true" EXIT
    "$hpcval" lab up --nodes "$nodes" --no-file-server
    # shellcheck disable=SC2086
    "$py" "$here/bench/detection.py" record "$out" --rate "$rate" --minutes "$minutes" $extra
' detection "$py" "$hpcval" "$out" "$rate" "$minutes" "$here" "$extra" "$nodes"
echo "samples: $out"
"$py" "$here/bench/detection_eval.py" "$out"
