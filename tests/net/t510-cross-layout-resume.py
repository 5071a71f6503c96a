#!/usr/bin/env python3
"""t510: a checkpoint written under one data-parallel layout resumes under
another through adjoin-train, and the resumed run equals an uninterrupted run.

LeNet-5 in float64 with Adam on 390 of the provisioned digits, global batch 50
(8 batches per epoch, the last of 40; dp4's shares are 13, 13, 12, 12), 2
epochs.  Each writer runs with --checkpoint-every 3 and stops after 12
batches, so its last checkpoint sits in the middle of epoch 2 (batch 3); the
resumer loads it under another layout and finishes.  Cases: dp2 -> sequential,
sequential -> dp2, dp4 -> sequential, sequential -> dp4, and dist2 x 2
replicas -> dp2.  Every final checkpoint (parameters and Adam moments) is
compared with the uninterrupted sequential run's: relative difference below
1e-12, the same step count, position and generator state, and the same final
test accuracy.  The uninterrupted dp2 and dp4 runs are compared the same way.
Skipped (77) when data/mnist has not been provisioned.

Usage: t510-cross-layout-resume.py MPIEXEC ADJOIN_TRAIN DATA_DIR"""
import shutil
import sys
import tempfile

from train_cli import arguments, Checks, read_checkpoint, relative_difference, run

mpiexec, train, data = arguments("t510")
TOLERANCE = 1e-12
LAYOUTS = {"sequential": (1, []), "dp2": (2, ["--layout", "dp"]), "dp4": (4, ["--layout", "dp"]),
           "dist2x2": (4, ["--layout", "dist2", "--replicas", "2"])}
work = tempfile.mkdtemp(prefix="adjoin-t510-")
checks = Checks("t510")
common = [train, "--data", data, "--train-limit", "390", "--test-limit", "200", "--batch", "50", "--epochs", "2",
          "--dtype", "f64", "--seed", "11"]


def train_run(layout, ckpt, *extra):
    ranks, flags = LAYOUTS[layout]
    return run(mpiexec, ranks, [*common, *flags, "--checkpoint", ckpt, *extra])


def accuracy(out):
    lines = [line for line in out.splitlines() if line.startswith("test_accuracy=")]
    return lines[-1] if lines else "no test_accuracy line"


def compare(label, got, want, got_accuracy, want_accuracy):
    a, b = read_checkpoint(got), read_checkpoint(want)
    diff = relative_difference(a, b)
    same = {field: a[field] == b[field] for field in ("steps", "epoch", "batch", "batch_size", "rng")}
    print(f"t510: {label:34s} relative difference {diff:.2e}, {got_accuracy} (uninterrupted {want_accuracy})")
    checks.check(diff < TOLERANCE, f"{label}: relative difference {diff:.3e} >= {TOLERANCE:g}")
    checks.check(all(same.values()), f"{label}: header fields differ: {[f for f, ok in same.items() if not ok]}")
    checks.check(got_accuracy == want_accuracy, f"{label}: {got_accuracy} != {want_accuracy}")


uninterrupted = {}
for layout in ("sequential", "dp2", "dp4"):
    path = f"{work}/{layout}.ckpt"
    code, out = train_run(layout, path)
    checks.check(code == 0, f"uninterrupted {layout}: exit {code}:\n{out[-800:]}")
    uninterrupted[layout] = (path, accuracy(out))
reference, reference_accuracy = uninterrupted["sequential"]
if checks.errors:
    sys.exit(checks.finish())
for layout in ("dp2", "dp4"):
    compare(f"uninterrupted {layout}", uninterrupted[layout][0], reference, uninterrupted[layout][1],
            reference_accuracy)

for writer, resumer in (("dp2", "sequential"), ("sequential", "dp2"), ("dp4", "sequential"), ("sequential", "dp4"),
                        ("dist2x2", "dp2")):
    label = f"{writer} -> {resumer}"
    path = f"{work}/{writer}-{resumer}.ckpt"
    code, out = train_run(writer, path, "--checkpoint-every", "3", "--stop-after-batches", "12")
    if not checks.check(code == 3, f"{label}: the stopped {writer} run exited {code}, not 3:\n{out[-800:]}"):
        continue
    stopped = read_checkpoint(path)
    checks.check((stopped["epoch"], stopped["batch"]) == (1, 3),
                 f"{label}: stopped at epoch {stopped['epoch']} batch {stopped['batch']}, not 1, 3")
    code, out = train_run(resumer, path, "--resume")
    if not checks.check(code == 0 and "at epoch 2, batch 3" in out,
                        f"{label}: the resumed {resumer} run: exit {code}:\n{out[-800:]}"):
        continue
    compare(f"{label} (resumed at epoch 2, batch 3)", path, reference, accuracy(out), reference_accuracy)

shutil.rmtree(work)
sys.exit(checks.finish())
