#!/bin/sh
# Scheduled validation: one `hpcval validate` run with its result made visible.
#
#   hpcval-scheduled.sh SITE [reframe options ...]
#
# Runs the site's checks, keeps the full output in
# var/<site>/scheduled/<UTC time>.log (the run report, HTML report and perflogs
# go to var/<site>/ as for any run), appends one line per run to
# var/<site>/scheduled/history and rewrites var/<site>/scheduled/last:
#
#   PASS 20261122T121500Z site=lab exit=0 2 passed, 0 failed, 0 skipped: PASS log=...
#   FAIL 20261122T122000Z site=lab exit=1 0 passed, 2 failed, 0 skipped: FAIL log=...
#   SKIP 20261122T122100Z site=lab exit=75 previous run still running (lock ...); this run skipped
#   INTERRUPTED 20261122T122200Z site=lab exit=143 ... (stopped by SIGTERM: timeout, kill)
#
# On failure it prints what failed to stderr and exits non-zero, so cron mails
# it (MAILTO) and Slurm marks the job FAILED with the exit code; on success it
# prints nothing (no mail for a good night). Called by the crontab, scrontab
# and validate.sbatch files beside it; works from any directory and with
# cron's minimal environment.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=${HPCVAL_ROOT:-$(cd "$here/../../.." && pwd)}
site=${1:?usage: hpcval-scheduled.sh SITE [reframe options ...]}
shift
hpcval=${HPCVAL:-$root/.venv/bin/hpcval}
store=${HPCVAL_VAR:-$root/var}/$site/scheduled
mkdir -p "$store"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
log=$store/$stamp.log

cd "$root" || exit 2
# one run at a time per site: a run still going when the next is due makes the
# next one a visible SKIP, not a second run competing for the same nodes
exec 9>"$store/.lock"
if ! flock -n 9; then
    msg="previous run still running (lock $store/.lock); this run skipped"
    echo "SKIP $stamp site=$site exit=75 $msg" >>"$store/history"
    echo "hpcval scheduled validation of '$site': $msg" >&2
    exit 75
fi
if [ ! -x "$hpcval" ]; then
    msg="hpcval scheduled validation of '$site' could not start: $hpcval not found"
    echo "FAIL $stamp site=$site exit=127 $msg" >>"$store/history"
    echo "FAIL $stamp site=$site exit=127 $msg" >"$store/last"
    echo "$msg" >&2
    exit 127
fi
{
    echo "# hpcval scheduled validation: site=$site host=$(hostname) start=$stamp"
    echo "# slurm job: ${SLURM_JOB_ID:-none}"
} >"$log"
# a stop from outside (timeout, systemd, kill, Slurm's time limit) reaches
# hpcval, which stops its run cleanly and exits 128 + N (docs/errors.md)
"$hpcval" validate --site "$site" -- "$@" >>"$log" 2>&1 &
child=$!
for sig in TERM HUP INT; do
    trap "kill -$sig $child 2>/dev/null" $sig
done
rc=0
wait "$child" || rc=$?
while kill -0 "$child" 2>/dev/null; do  # woken by a signal: wait for hpcval itself
    rc=0
    wait "$child" || rc=$?
done
trap - TERM HUP INT

summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' "$log" | tail -n 1)
[ -n "$summary" ] || summary="no verdict: reframe did not complete (see the log)"
[ $rc -eq 0 ] && status=PASS || status=FAIL
[ $rc -eq 129 ] || [ $rc -eq 130 ] || [ $rc -eq 143 ] && status=INTERRUPTED
line="$status $stamp site=$site exit=$rc $summary log=$log"
echo "$line" >>"$store/history"
echo "$line" >"$store/last.tmp" && mv "$store/last.tmp" "$store/last"

if [ $rc -ne 0 ]; then
    {
        echo "hpcval scheduled validation of '$site' FAILED ($stamp, exit $rc): $summary"
        grep -E '^RESULT: | is outside |^(REGRESSED|UNSTABLE|HELD) |^hpcval: |^  [^ ].*\): (sanity|setup|run|performance|compile|cleanup)[a-z_]*: ' \
            "$log" | head -n 20
        echo "full output: $log"
    } >&2
fi
exit $rc
