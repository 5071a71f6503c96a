#!/usr/bin/env python3
"""t522: adjoin-train --model encdec end to end on a slice of Fashion-MNIST.

In float64 with Adam, 300 training and 200 test images, global batch 40 (the
last batch of 20), one epoch:
 - the 2x2 spatial grid (4 ranks) ends within 1e-12 relative of the
   sequential run's checkpoint, batch norm running statistics included, with
   the same test accuracy;
 - two data-parallel replicas of the 2x1 grid (4 ranks) end within 1e-12 of
   two sequential replicas (--layout dp on 2 ranks), and both within 1e-12
   of the sequential run: batch norm synchronises its statistics over the
   replicas (SyncBN), so each replica normalises with the whole batch's;
 - a 2x2 run stopped after 3 batches and resumed with --resume writes a
   checkpoint byte-identical to the uninterrupted run's (version 3, with the
   6 running statistics, every variance positive);
 - bad layouts are refused by name (exit 2).
Skipped (77) when data/fashion-mnist has not been provisioned.

Usage: t522-encdec-train.py MPIEXEC ADJOIN_TRAIN DATA_DIR"""
import os
import shutil
import sys
import tempfile

from train_cli import arguments, Checks, read_checkpoint, relative_difference, run

mpiexec, train, data = arguments("t522", "fashion-mnist")
TOLERANCE = 1e-12
work = tempfile.mkdtemp(prefix="adjoin-t522-")
checks = Checks("t522")
common = [train, "--model", "encdec", "--data", data, "--train-limit", "300", "--test-limit", "200", "--batch", "40",
          "--epochs", "1", "--dtype", "f64", "--seed", "7"]


def accuracy(out):
    lines = [line for line in out.splitlines() if line.startswith("test_accuracy=")]
    return lines[-1] if lines else "no test_accuracy line"


def train_run(name, ranks, flags):
    path = f"{work}/{name}.ckpt"
    code, out = run(mpiexec, ranks, [*common, *flags, "--checkpoint", path])
    checks.check(code == 0, f"{name}: exit {code}\n{out[-2000:]}")
    return (path if code == 0 else None), accuracy(out)


def compare(name, ranks, flags, reference):
    path, got = train_run(name, ranks, flags)
    if not (path and reference[0]):
        return path
    diff = relative_difference(read_checkpoint(path), read_checkpoint(reference[0]))
    print(f"t522: {name:16s} on {ranks} ranks: relative difference {diff:.2e}, {got} (reference {reference[1]})")
    checks.check(diff < TOLERANCE, f"{name}: relative difference {diff:.3e} >= {TOLERANCE:g}")
    checks.check(got == reference[1], f"{name}: {got} != {reference[1]}")
    return path


sequential = train_run("sequential", 1, ["--layout", "sequential"])
grid = compare("2x2", 4, ["--layout", "2x2"], sequential)
dp = compare("dp2", 2, ["--layout", "dp"], sequential)
compare("2x1-replicas-2", 4, ["--layout", "2x1", "--replicas", "2"], (dp, sequential[1]))

if grid:
    ck = read_checkpoint(grid)
    names = [name for name, _ in ck["state"]]
    variances = [v for name, values in ck["state"] if name == "running_var" for v in values]
    print(f"t522: 2x2 checkpoint version {ck['version']}, state buffers {names}, smallest running variance "
          f"{min(variances) if variances else float('nan'):.3e}")
    checks.check(ck["version"] == 3 and names == ["running_mean", "running_var"] * 3,
                 f"checkpoint version {ck['version']} with state {names}")
    checks.check(variances and min(variances) > 0, "a running variance is not positive")
    resumed = f"{work}/resumed.ckpt"
    code, out = run(mpiexec, 4, [*common, "--layout", "2x2", "--checkpoint", resumed, "--checkpoint-every", "2",
                                 "--stop-after-batches", "3"])
    checks.check(code == 3, f"stopped run: exit {code}, expected 3\n{out[-2000:]}")
    code, out = run(mpiexec, 4, [*common, "--layout", "2x2", "--checkpoint", resumed, "--resume"])
    checks.check(code == 0, f"resumed run: exit {code}\n{out[-2000:]}")
    same = os.path.exists(resumed) and open(resumed, "rb").read() == open(grid, "rb").read()
    print(f"t522: 2x2 stopped after 3 batches and resumed: checkpoint byte-identical {'yes' if same else 'NO'}")
    checks.check(same, "the resumed run's checkpoint differs from the uninterrupted run's")

for layout, ranks, phrase in [("8x1", 2, "layout 8x1: "), ("2x2", 2, "layout 2x2 needs 4 ranks"),
                              ("dist4", 2, "placement 'dist4' of")]:
    code, out = run(mpiexec, ranks, [*common, "--layout", layout])
    print(f"t522: --layout {layout} on {ranks} ranks: exit {code}: {out.strip().splitlines()[0] if out.strip() else ''}")
    checks.check(code == 2 and phrase in out, f"--layout {layout}: exit {code}, wanted '{phrase}' in\n{out}")

shutil.rmtree(work, ignore_errors=True)
sys.exit(checks.finish())
