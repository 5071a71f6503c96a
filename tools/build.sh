#!/bin/sh
# Configures (once) and builds adjoin in BUILD_DIR (default: build), warnings as
# errors.  Extra arguments go to `meson setup` (or `meson configure` on an
# existing build), e.g. -Db_sanitize=address,undefined.  TARGETS (default:
# everything) names the ninja targets to build, e.g. "tests/t300-conv"; TESTS
# instead selects tests by suite and rank count (tools/test-select.py's
# arguments, e.g. "--suite unit") and builds what they need alone.
# Quiet on success; on failure the end of the log says why.
set -eu
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" --werror "$@" >"$log" 2>&1 || { tail -40 "$log"; exit 1; }
elif [ $# -gt 0 ]; then
  # An existing build takes the options too, so a changed option in a script
  # reaches a developer's old build directory as it does a fresh clone's.
  meson configure "$dir" "$@" >"$log" 2>&1 || { tail -40 "$log"; exit 1; }
fi
if [ -n "${TESTS:-}" ]; then
  # The introspection reads the build files, regenerated first if stale.
  ninja -C "$dir" build.ninja >"$log" 2>&1 || { tail -40 "$log"; exit 1; }
  # shellcheck disable=SC2086 # test-select.py's arguments
  TARGETS=$(python3 tools/test-select.py --targets "$dir" $TESTS)
fi
# shellcheck disable=SC2086
ninja -C "$dir" ${TARGETS:-} >"$log" 2>&1 || { grep -E "error|FAILED" "$log" | head -40; exit 1; }
