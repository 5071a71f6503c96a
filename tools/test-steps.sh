# shellcheck shell=sh
# Sourced by tools/test.sh and tools/test-extra.sh: runs their steps in turn,
# each to the end even when an earlier one failed, and closes with the count
# over every step's meson log (tools/test-totals.py).
#
# A script defines one function per step and calls `run_steps "STEP ..." ARGS`.  A step
# runs under `set -e` in a subshell of its own, so its first failing command
# ends it (and it counts as failed); it names the log its tests write with
# `counted LABEL LOG` before running them, so a step that fails early counts
# as a failure too.  run_steps passes ARGS to every step.

counted_file=$(mktemp)
trap 'rm -f "$counted_file"' EXIT

counted() {
  rm -f "$2"
  echo "$1=$2" >>"$counted_file"
}

run_steps() {
  steps=$1
  shift
  failed_steps=
  start=$(date +%s)
  for step in $steps; do
    step_start=$(date +%s)
    echo "== $step"
    set +e
    (set -e; "$step" "$@")
    status=$?
    set -e
    [ "$status" -eq 0 ] || failed_steps="$failed_steps $step"
    echo "== $step: $(( $(date +%s) - step_start )) s, exit status $status"
  done
  echo "== $(( ($(date +%s) - start + 30) / 60 )) min in all; the count, per step and in all:"
  # shellcheck disable=SC2046 # one LABEL=LOG word per line
  python3 tools/test-totals.py $(cat "$counted_file") || failed_steps="$failed_steps (count)"
  if [ -n "$failed_steps" ]; then
    echo "failed:$failed_steps"
    return 1
  fi
}
