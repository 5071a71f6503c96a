#!/bin/sh
# Configures (once) and builds adjoin in BUILD_DIR (default: build).
# Extra arguments go to `meson setup`, e.g. -Db_sanitize=address,undefined.
set -eu
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build}
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" --werror "$@" >/dev/null
fi
ninja -C "$dir" >/dev/null
