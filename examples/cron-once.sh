#!/bin/sh
# cron-once.sh - run a nightly job once across many machines.
#
# Every host has the same crontab line; whichever host's redislock takes
# the lock first runs the job, and the others, finding it taken, skip it
# quietly:
#
#   # m h dom mon dow  command
#   0 2 * * *  REDISLOCK_URL=redis://jobs:secret@10.0.0.5:6379/2 /usr/local/bin/cron-once.sh
#
# or, without this script, the one line it comes down to:
#
#   0 2 * * *  redislock -n -E 0 -e 60 jobs:nightly -- /usr/local/bin/nightly-report
#
# (Keep the password out of crontab lines others can read: set
# REDISLOCK_URL in the crontab's environment or in this script, with the
# file readable by its user only.)
#
# The options:
#   -n        do not wait: if another host holds the lock, it is running
#             the job right now, so this host has nothing to do.
#   -E 0      that case exits 0 instead of 75 (busy), so that cron does
#             not mail a "failure" from every host but one.
#   -e 60     the lease: renewed every 20 s while the job runs, however long
#             it runs; if this host dies, the lock frees itself within 60 s.
#   --        the end of redislock's options: the rest is the job.
#
# A lock only keeps two runs apart while one is running: a host whose
# clock is late (or whose cron fires late) and starts after the job
# finished would run it a second time.  Give the job a marker of its own
# if that matters (below: a key that says which night was done).
#
# Exit statuses, as cron sees them (redislock(1), EXIT STATUS):
#   0      the job ran and succeeded here, or another host holds the lock
#          (-E 0), or the night was already done (the marker)
#   1-63   the job's own failure status, passed through
#   69     Redis could not be used (down, refused the password, ...): the
#          job did not run here; if no host reached Redis, it did not run
#   71     a system error (fork, memory): the job did not run here
#   74     the job ran (its own status is in the message), but the lock
#          could not be released: it stays until its lease runs out
#   76     the lock was lost while the job ran (Redis unreachable for a
#          whole lease, say): the job was stopped, and may have run only
#          in part
#   126    the job is not executable; 127 not found
#   128+N  the job was killed by signal N
set -u

job=${1:-/usr/local/bin/nightly-report}
key=${CRON_ONCE_KEY:-jobs:nightly}
redislock=${REDISLOCK:-redislock}
REDISLOCK_URL=${REDISLOCK_URL:-redis://127.0.0.1:6379}
export REDISLOCK_URL

# The night's marker: one key per date, set by the run that succeeded and
# kept two days, checked inside the lock.  Optional: without redis-cli
# (which takes redis:// URLs only) the lock alone guards the job.
done_key="$key:done:$(date +%Y-%m-%d)"
export job done_key

# The job gets REDISLOCK_TOKEN, a fencing token, to hand to whatever it
# writes if stale writers must be refused (redislock(1)).
# shellcheck disable=SC2016
exec "$redislock" -n -E 0 -e 60 "$key" -- sh -c '
    rcli() {
        command -v redis-cli > /dev/null 2>&1 &&
            redis-cli -u "$REDISLOCK_URL" --no-auth-warning "$@" 2> /dev/null
    }
    [ "$(rcli EXISTS "$done_key")" = 1 ] && exit 0    # done tonight
    "$job" || exit $?
    rcli SET "$done_key" "$(hostname)" EX 172800 > /dev/null
    exit 0'
