#!/usr/bin/env bash
# Detection experiment (docs/judging.md): on the lab, >= 20 clean IMB PingPong runs
# and >= 10 runs each on links 3, 5, 10 and 20 % slower, 5 samples per figure per run;
# then the detection tables. Root; takes the lab lock for the whole up..runs..down.
#
#   sudo bench/detection.sh [OUT.json]        # default tests/data/judging/lab-pingpong.json
#   DETECTION_RATE=200 DETECTION_MINUTES=27 sudo bench/detection.sh
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-$here/.venv/bin/python}"
hpcval="${HPCVAL:-$here/.venv/bin/hpcval}"
out="${1:-$here/tests/data/judging/lab-pingpong.json}"
rate="${DETECTION_RATE:-200}"
minutes="${DETECTION_MINUTES:-27}"
if [ "$(id -u)" != 0 ]; then
    echo "detection.sh: needs root (the lab makes network namespaces)" >&2; exit 3
fi
mkdir -p "$(dirname "$out")"
lock=/tmp/hpcval-lab.lock
# shellcheck disable=SC2016
flock -w 3600 "$lock" bash -c '
    set -euo pipefail
    py="$1"; hpcval="$2"; out="$3"; rate="$4"; minutes="$5"; here="$6"
    trap "\"$hpcval\" lab down >/dev/null 2>&1 || true" EXIT
    "$hpcval" lab up --nodes 2 --no-file-server
    "$py" "$here/bench/detection.py" record "$out" --rate "$rate" --minutes "$minutes"
' detection "$py" "$hpcval" "$out" "$rate" "$minutes" "$here"
echo "samples: $out"
"$py" "$here/bench/detection_eval.py" "$out"
