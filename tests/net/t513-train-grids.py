#!/usr/bin/env python3
"""t513: adjoin-train's grid layouts train what the sequential run trains.

Both models (--model lenet, --model mlp) in float64 with Adam on 300 of the
provisioned digits, global batch 40 (8 batches, the last of 20), one epoch:
the sequential run against the grids 2x1 (rows or features over 2 workers),
1x2 and 2x2 (2 data-parallel replicas of 2x1, the weight gradients summed by
the bucketed reducer), 3x1 (16 channels and 400 features over 3 workers,
unevenly), the library's hybrid4-batch LeNet-5 (rows x batch inside the
layers) and paper 001's Fig. 7 (networks/lenet5/fig7.place: convolutions
batch-parallel over 4 workers, the affine layers on a 2x2 grid).  Each final checkpoint (parameters and Adam moments) must
be within 1e-12 relative of the sequential one, with the same test accuracy.
Also: a grid with more feature workers than the MLP's 10 classes, and
malformed grids, are refused with a message naming them.
Skipped (77) when data/mnist has not been provisioned.

Usage: t513-train-grids.py MPIEXEC ADJOIN_TRAIN DATA_DIR"""
import shutil
import sys
import tempfile

from train_cli import arguments, Checks, read_checkpoint, relative_difference, run

mpiexec, train, data = arguments("t513")
TOLERANCE = 1e-12
GRIDS = {"lenet": [("2x1", 2), ("1x2", 2), ("3x1", 3), ("2x2", 4), ("hybrid4-batch", 4), ("fig7", 4)],
         "mlp": [("2x1", 2), ("1x2", 2), ("2x2", 4)]}
work = tempfile.mkdtemp(prefix="adjoin-t513-")
checks = Checks("t513")
common = [train, "--data", data, "--train-limit", "300", "--test-limit", "200", "--batch", "40", "--epochs", "1",
          "--dtype", "f64", "--seed", "5"]


def accuracy(out):
    lines = [line for line in out.splitlines() if line.startswith("test_accuracy=")]
    return lines[-1] if lines else "no test_accuracy line"


def train_run(model, layout, ranks):
    path = f"{work}/{model}-{layout}.ckpt"
    code, out = run(mpiexec, ranks, [*common, "--model", model, "--layout", layout, "--checkpoint", path])
    checks.check(code == 0, f"{model} {layout}: exit {code}\n{out[-2000:]}")
    return path if code == 0 else None, accuracy(out)


for model, grids in GRIDS.items():
    reference, reference_accuracy = train_run(model, "sequential", 1)
    for layout, ranks in grids:
        path, got_accuracy = train_run(model, layout, ranks)
        if not (reference and path):
            continue
        diff = relative_difference(read_checkpoint(path), read_checkpoint(reference))
        print(f"t513: {model:5s} {layout:13s} on {ranks} ranks: relative difference to sequential {diff:.2e}, "
              f"{got_accuracy} (sequential {reference_accuracy})")
        checks.check(diff < TOLERANCE, f"{model} {layout}: relative difference {diff:.3e} >= {TOLERANCE:g}")
        checks.check(got_accuracy == reference_accuracy, f"{model} {layout}: {got_accuracy} != {reference_accuracy}")

for model, layout, ranks, phrase in [("mlp", "11x1", 2, "grid=11x1 puts 11 row workers on 123 input and 10 output"),
                                     ("mlp", "2x", 2, "placement '2x' of"),
                                     ("lenet", "0x2", 2, "placement '0x2': entry 1 '0' is out of range 1..4096")]:
    code, out = run(mpiexec, min(ranks, 4), [*common, "--model", model, "--layout", layout])
    print(f"t513: {model} --layout {layout}: exit {code}: {out.strip().splitlines()[0] if out.strip() else ''}")
    checks.check(code != 0 and phrase in out, f"{model} --layout {layout}: exit {code}, wanted '{phrase}' in\n{out}")

shutil.rmtree(work, ignore_errors=True)
sys.exit(checks.finish())
