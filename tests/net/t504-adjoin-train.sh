#!/bin/sh
# adjoin-train end to end on 4 ranks (layout dist4) with a small slice of the
# provisioned MNIST digits:
#  - a run stopped during epoch 3 (--stop-after-batches, a simulated crash,
#    exit 3) and resumed with --resume ends with a checkpoint byte-identical
#    to an uninterrupted run's (parameters, Adam state, step count, shuffle
#    state, position), prints the same final accuracy, and its metrics CSV
#    and SVG plot cover all 4 epochs;
#  - a second uninterrupted run is byte-identical to the first;
#  - a corrupted checkpoint is refused (exit 1, CRC32 message) and left as is;
#  - bad flags and missing data fail with a clear message and exit 2 / 1.
# Skipped (77) when data/mnist has not been provisioned.
#
#   sh t504-adjoin-train.sh ADJOIN_TRAIN MPIEXEC DATA_DIR
set -u
train=$1 mpiexec=$2 data=$3
[ -r "$data/train-images-idx3-ubyte" ] || { echo "t504: skipped: no MNIST under $data: provision it with \`sh tools/provision-data.sh mnist\`"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
errors=0
fail() { echo "t504: FAIL: $*"; errors=$((errors + 1)); }

# 512 training images in batches of 64: 8 batches per epoch, so batch 20 is in epoch 3.
small="--data $data --train-limit 512 --test-limit 256 --batch 64 --epochs 4 --layout dist4 --seed 7"
run() { "$mpiexec" -n 4 "$train" $small "$@"; }

run --checkpoint "$work/a.ckpt" --metrics "$work/a.csv" > "$work/a.out" 2>&1 || fail "uninterrupted run: $(tail -3 "$work/a.out")"
run --checkpoint "$work/b.ckpt" --metrics "$work/b.csv" --stop-after-batches 20 > "$work/b1.out" 2>&1
status=$?
[ $status -eq 3 ] || fail "the stopped run exited $status, not 3"
# Under a launcher that gives the ranks a terminal (Open MPI's), rank 0 draws
# a progress bar ended by carriage returns: lines are split at both.
epochs=$(tr '\r' '\n' < "$work/b1.out")
echo "$epochs" | grep -q "^epoch   2/4" && ! echo "$epochs" | grep -q "^epoch   3/4" ||
  fail "the stopped run did not stop in epoch 3"
run --checkpoint "$work/b.ckpt" --metrics "$work/b.csv" --resume > "$work/b2.out" 2>&1 || fail "resumed run: $(tail -3 "$work/b2.out")"
grep -q "resumed from .* at epoch 3, batch 0" "$work/b2.out" || fail "the resumed run did not start at epoch 3"
cmp -s "$work/a.ckpt" "$work/b.ckpt" && echo "t504: stopped in epoch 3 + resumed: final checkpoint byte-identical to the uninterrupted run" ||
  fail "resumed run's checkpoint differs from the uninterrupted run's"
a=$(tail -1 "$work/a.out") b=$(tail -1 "$work/b2.out")
echo "t504: uninterrupted: $a, resumed: $b"
echo "$a" | grep -Eq '^test_accuracy=[01]\.[0-9]{4}$' || fail "last line '$a' is not test_accuracy=0.XXXX"
[ "$a" = "$b" ] || fail "final accuracies differ: $a vs $b"
[ "$(head -1 "$work/b.csv")" = "epoch,loss,train_acc,test_acc,seconds,images_per_s" ] || fail "metrics header: $(head -1 "$work/b.csv")"
[ "$(cut -d, -f1 "$work/b.csv" | tail -n +2 | tr '\n' ' ')" = "1 2 3 4 " ] || fail "metrics rows: $(cut -d, -f1 "$work/b.csv" | tr '\n' ' ')"
[ "$(cut -d, -f2-4 "$work/a.csv")" = "$(cut -d, -f2-4 "$work/b.csv")" ] || fail "loss/accuracy columns differ between the runs"
grep -q "<svg" "$work/b.svg" && grep -q "polyline" "$work/b.svg" || fail "no plot at $work/b.svg"

# Reproducibility: the same command again gives the same bytes.
run --checkpoint "$work/a2.ckpt" > "$work/a2.out" 2>&1 || fail "second run: $(tail -3 "$work/a2.out")"
cmp -s "$work/a.ckpt" "$work/a2.ckpt" && echo "t504: two runs with seed 7: checkpoints byte-identical" ||
  fail "two runs with the same seed differ"

# A corrupted checkpoint is refused and kept as it was.
cp "$work/a.ckpt" "$work/c.ckpt"
printf 'X' | dd of="$work/c.ckpt" bs=1 seek=5000 conv=notrunc 2>/dev/null
cp "$work/c.ckpt" "$work/c.orig"
run --checkpoint "$work/c.ckpt" --resume > "$work/c.out" 2>&1
status=$?
[ $status -eq 1 ] && grep -q "CRC32 mismatch" "$work/c.out" || fail "corrupted checkpoint: exit $status, $(cat "$work/c.out")"
cmp -s "$work/c.ckpt" "$work/c.orig" || fail "the refused checkpoint was modified"
echo "t504: corrupted checkpoint: $(grep CRC32 "$work/c.out")"

# Bad flags: exit 2 and a message naming the flag (every rank parses them
# alike, so one rank shows it); missing data: exit 1 and a hint.
for flags in "--epochs 0" "--optimizer rmsprop" "--dtype f16" "--layout dist3" "--batch 12x" "--resume" "--bogus"; do
  "$mpiexec" -n 1 "$train" $flags > "$work/f.out" 2>&1
  status=$?
  [ $status -eq 2 ] && [ -s "$work/f.out" ] || fail "flags '$flags': exit $status"
  echo "t504: '$flags' -> exit $status: $(head -1 "$work/f.out")"
done
"$mpiexec" -n 1 "$train" --layout dist4 > "$work/f.out" 2>&1
[ $? -eq 2 ] && grep -q "needs 4 ranks" "$work/f.out" || fail "dist4 on 1 rank: $(cat "$work/f.out")"
"$mpiexec" -n 2 "$train" --data "$work/nowhere" --layout dist2 > "$work/f.out" 2>&1
[ $? -eq 1 ] && grep -q "provision-data.sh" "$work/f.out" || fail "missing data: $(cat "$work/f.out")"
echo "t504: missing data -> $(head -1 "$work/f.out")"

[ $errors -eq 0 ] && echo "t504-adjoin-train: No Errors" || echo "t504-adjoin-train: Found $errors errors"
[ $errors -eq 0 ]
