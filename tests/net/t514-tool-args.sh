#!/bin/sh
# The command-line tools' arguments: --help and -h print the usage on stdout
# and exit 0; an option missing its value, adjoin-halo without --shape or with
# --partition 0, and example-mlp-dp's SEED and EPOCHS that are not whole
# numbers exit 2 with a message naming them; under mpiexec -n 2 rank 0 alone
# speaks (every line once) for the tools that start MPI; example-mlp-dp on one rank hashes its parameters
# for real; the accuracy scripts report a failed run, try the others and exit
# 1, and launch each layout on the ranks it needs (a stub adjoin-train prints
# its rank count).
#
#   sh t514-tool-args.sh MPIEXEC DOTTEST PLAN HALO PHANTOM MLP_DP TRAIN TOOLS_DIR MNIST_DIR
set -u
mpiexec=$1 dottest=$2 plan=$3 halo=$4 phantom=$5 mlp=$6 train=$7 tools=$8 mnist=$9
# The accuracy scripts run from the checkout: give them an absolute path.
case $train in /*) ;; *) train=$PWD/$train ;; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
errors=0
fail() { echo "t514: FAIL: $*"; errors=$((errors + 1)); }

# expect STATUS STREAM NAME PATTERN COMMAND...: COMMAND exits STATUS and its
# STREAM (out or err) has exactly one line matching PATTERN.
expect() {
  want=$1 stream=$2 name=$3 pattern=$4
  shift 4
  "$@" > "$work/out" 2> "$work/err"
  status=$?
  count=$(grep -c -- "$pattern" "$work/$stream")
  shown=$(grep -m 1 -- "$pattern" "$work/$stream" || head -1 "$work/$stream")
  echo "t514: $name -> exit $status, $count x '$pattern': $shown"
  [ "$status" -eq "$want" ] || fail "$name: exit status $status, not $want: $(head -3 "$work/err")"
  [ "$count" -eq 1 ] || fail "$name: std$stream has '$pattern' $count times, not once: $(head -5 "$work/$stream")"
}

# also STREAM PATTERN: the last command's STREAM holds PATTERN as well.
also() {
  if grep -q -- "$2" "$work/$1"; then echo "t514:   ... and '$2': $(grep -m 1 -- "$2" "$work/$1")"
  else fail "$name: std$1 lacks '$2': $(head -8 "$work/$1")"; fi
}

# shellcheck disable=SC2317 # called through expect
two() { "$mpiexec" -n 2 "$@"; }

# 1: help.
expect 0 out "adjoin-dottest --help, 2 ranks" "^usage: " two "$dottest" --help
expect 0 out "adjoin-dottest -h, 2 ranks" "^usage: " two "$dottest" -h
expect 0 out "adjoin-plan --help" "^usage: adjoin-plan" "$plan" --help
expect 0 out "adjoin-plan -h" "^usage: adjoin-plan" "$plan" -h
expect 0 out "adjoin-phantom -h" "^usage: adjoin-phantom" "$phantom" -h
expect 0 out "adjoin-phantom --calibrate -h, 2 ranks" "^usage: adjoin-phantom" two "$phantom" --calibrate -h
expect 0 out "adjoin-halo -h" "^usage: adjoin-halo" "$halo" -h
expect 0 out "example-mlp-dp --help, 2 ranks" "^usage: " two "$mlp" --help
expect 0 out "example-mlp-dp -h" "^usage: " "$mlp" -h

# 2: missing values.
expect 2 err "adjoin-dottest --min-ranks, no value" "^adjoin-dottest: --min-ranks needs a value$" \
  two "$dottest" --min-ranks
expect 2 err "adjoin-dottest --filter, no value" "^adjoin-dottest: --filter needs a value$" two "$dottest" --filter
expect 2 err "adjoin-halo without --shape" "^adjoin-halo: --shape is required$" "$halo" --kernel 3

# 3: no worker count of 0.
expect 2 err "adjoin-halo --partition 0" "^adjoin-halo: --partition '0': entry 1 '0' is out of range 1..1048576$" \
  "$halo" --shape 8 --partition 0
expect 2 err "adjoin-halo --partition 4,0" "--partition '4,0': entry 2 '0' is out of range" "$halo" --shape 8,8 \
  --partition 4,0
expect 2 err "adjoin-halo --partition 1024,2048" "^adjoin-halo: --partition 1024x2048 makes more than the 1048576 workers" \
  "$halo" --shape 8,8 --partition 1024,2048

# 4: one voice under mpiexec for the tools that start MPI (adjoin-phantom
# and adjoin-plan with --calibrate); the others are plain processes
# (t518 runs them inside an MPI job).
expect 0 out "adjoin-halo" "output_shape" "$halo" --shape 8 --partition 2 --kernel 3
expect 0 out "adjoin-phantom" "^FFN n = 64" "$phantom" --n 64 --p 2 --k 2
expect 2 err "adjoin-phantom --calibrate --n x, 2 ranks" "^adjoin-phantom: --n 'x' is not an integer$" \
  two "$phantom" --calibrate --n x

# 6: example-mlp-dp's numbers (refused before any data is read) and its hash
# on one rank.
expect 2 err "example-mlp-dp SEED -1, 2 ranks" "^example-mlp-dp: SEED '-1' is not a whole number" \
  two "$mlp" "$work" 1 -1
expect 2 err "example-mlp-dp EPOCHS 3x" "^example-mlp-dp: EPOCHS '3x' is not a whole number" "$mlp" "$work" 3x
if [ -e "$mnist/train-images-idx3-ubyte" ] || [ -e "$mnist/train-images-idx3-ubyte.gz" ]; then
  expect 0 out "example-mlp-dp, 1 rank" "one replica, so nothing compared (parameter hash [0-9a-f]\{16\})" \
    "$mpiexec" -n 1 "$mlp" "$mnist" 1 1 128
  grep -q "hash 0000000000000000" "$work/out" && fail "example-mlp-dp on 1 rank printed a zero hash"
else
  echo "t514: example-mlp-dp, 1 rank: skipped (no MNIST under $mnist; sh tools/provision-data.sh)"
fi

# 5: the accuracy scripts.  An unknown layout fails at once in adjoin-train.
results=$work/results
expect 1 err "lenet-accuracy.sh, layouts foo bar" "^lenet-accuracy: 2 of 2 runs failed" \
  env ADJOIN_TRAIN="$train" RESULTS="$results" sh "$tools/lenet-accuracy.sh" mnist 1 "foo bar"
also err "placement 'foo' of"
also err "placement 'bar' of"
# A stub in adjoin-train's place says how many ranks mpiexec gave it and fails.
stub=$work/adjoin-train-stub
# shellcheck disable=SC2016 # the stub expands them
printf '#!/bin/sh\necho "stub: $PMI_SIZE ranks: $*"\nexit 3\n' > "$stub"
chmod +x "$stub"
expect 1 err "lenet-accuracy.sh, stub" "^lenet-accuracy: 3 of 3 runs failed" \
  env ADJOIN_TRAIN="$stub" RESULTS="$results" sh "$tools/lenet-accuracy.sh" mnist 1 "hybrid4-batch 2x3 dp3"
also err "stub: 4 ranks: .*--layout hybrid4-batch"
also err "stub: 6 ranks: .*--layout 2x3"
also err "stub: 3 ranks: .*--layout dp "
expect 1 err "encdec-accuracy.sh, stub" "^encdec-accuracy: 3 of 3 runs failed" \
  env ADJOIN_TRAIN="$stub" RESULTS="$results" DATA="$work/no-data" sh "$tools/encdec-accuracy.sh" 1
also err "stub: 4 ranks: .*--layout 2x2"
also err "pytorch seed 1 FAILED"

[ "$errors" -eq 0 ] && echo "t514: all tools answer their arguments" && exit 0
exit 1
