# shellcheck shell=sh
# Sourced by tools/lenet-accuracy.sh and tools/encdec-accuracy.sh: runs whose
# output goes to a log, a failed one reported on stderr and counted, so the
# other runs go ahead and the script still ends in failure.

runs=0 failures=0

# run_logged PROGRAM LABEL LOG COMMAND...: runs COMMAND into LOG.  On failure
# says so on stderr with the log's first lines (a refusal) and last lines (a
# crash), counts it and returns 1.  Its variables start with run_ (sh has no
# locals), so a caller's own stay as they were.
run_logged() {
  run_program=$1 run_label=$2 run_log=$3
  shift 3
  runs=$((runs + 1))
  "$@" > "$run_log" 2>&1 && return 0
  run_status=$?
  failures=$((failures + 1))
  echo "$run_program: $run_label FAILED (exit $run_status); $run_log:" >&2
  if [ "$(wc -l < "$run_log")" -le 10 ]; then sed 's/^/  /' "$run_log" >&2
  else { head -3 "$run_log"; echo "..."; tail -5 "$run_log"; } | sed 's/^/  /' >&2; fi
  return 1
}

# exit_if_runs_failed PROGRAM RESULTS: exit 1, saying how many runs failed
# and where their logs are, when any did.
exit_if_runs_failed() {
  [ "$failures" -eq 0 ] && return 0
  echo "$1: $failures of $runs runs failed (logs in $2/)" >&2
  exit 1
}
