#!/usr/bin/env bash
# `ifmatch lock` as a cron job uses it: four jobs on one lock never overlap; a job's exit
# status comes back; a second job gives up after --timeout (exit 73). Usage: lock.sh IFMATCH_BINARY WORKDIR (IFMATCH_CONNECTION_STRING set).
set -euo pipefail
ifmatch=$1; work=$2
fail() { echo "lock.sh: $*" >&2; exit 1; }

# The critical section: a directory only one job may hold; a second mkdir fails.
job() {
  "$ifmatch" lock --blob locks/cron -- bash -c "
    mkdir '$work/inside' || { echo overlap >> '$work/errors'; exit 1; }
    echo \$IFMATCH_LEASE_ID >> '$work/leases'
    sleep 0.3
    rmdir '$work/inside'"
}
for _ in 1 2 3 4; do job & done
wait
[ ! -e "$work/errors" ] || fail "two jobs inside at once"
[ "$(sort -u "$work/leases" | wc -l)" = 4 ] || fail "expected 4 distinct leases: $(cat "$work/leases")"

status=0; "$ifmatch" lock --blob locks/cron -- bash -c 'exit 7' || status=$?
[ "$status" = 7 ] || fail "the command's exit status: got $status"

"$ifmatch" lock --blob locks/cron -- sleep 3 &
holder=$!
sleep 1
status=0; "$ifmatch" lock --blob locks/cron --timeout 1 -- true || status=$?
[ "$status" = 73 ] || fail "--timeout: expected 73, got $status"
wait "$holder"

echo "lock.sh: ok"
