# shellcheck shell=sh
# Sourced by the tests that run what the documentation shows:
# `fenced_blocks FILE TAG DIR` writes each fenced code block of the Markdown
# FILE whose info string names TAG after the language (```sh tour, ```c
# new-layer) to DIR/block-1, DIR/block-2, ... and prints how many it wrote.

fenced_blocks() {
  awk -v tag="$2" -v dir="$3" '
    /^```/ {
      if (state) { state = 0; next }
      state = 2
      n = split(substr($0, 4), words, " ")
      for (i = 2; i <= n; i++) if (words[i] == tag) state = 1
      if (state == 1) { count++; file = dir "/block-" count; printf "" > file }
      next
    }
    state == 1 { print >> file }
    END { print count + 0 }
  ' "$1"
}
