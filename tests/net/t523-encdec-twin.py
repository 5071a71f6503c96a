#!/usr/bin/env python3
"""t523: the PyTorch twin (tools/pytorch/encdec_pytorch.py) is the same network as
adjoin's encoder-decoder.  adjoin-train trains it for one epoch on 1,000
Fashion-MNIST images (float64, 2x2 grid on 4 ranks) and saves a checkpoint;
adjoin-train --resume evaluates that checkpoint on 2,000 test images, and the
twin loads the same parameters and running statistics into PyTorch and
evaluates them in float64: the two test accuracies must be equal.
Skipped (77) without data/fashion-mnist or without PyTorch under
/usr/bin/python3.

Usage: t523-encdec-twin.py MPIEXEC ADJOIN_TRAIN DATA_DIR TWIN_SCRIPT"""
import shutil
import subprocess
import sys
import tempfile

from train_cli import arguments, Checks, run

mpiexec, train, data = arguments("t523", "fashion-mnist")
twin = sys.argv[4]
if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode:
    print("t523: skipped: no PyTorch under /usr/bin/python3 (apt-get install python3-torch)")
    sys.exit(77)
work = tempfile.mkdtemp(prefix="adjoin-t523-")
checks = Checks("t523")
path = f"{work}/encdec.ckpt"
common = [train, "--model", "encdec", "--layout", "2x2", "--data", data, "--train-limit", "1000", "--test-limit",
          "2000", "--batch", "50", "--epochs", "1", "--lr", "0.01", "--dtype", "f64", "--seed", "11", "--checkpoint", path]


def accuracy(out):
    lines = [line for line in out.splitlines() if line.startswith("test_accuracy=")]
    return lines[-1] if lines else "no test_accuracy line"


code, out = run(mpiexec, 4, common)
checks.check(code == 0, f"training: exit {code}\n{out[-2000:]}")
code, out = run(mpiexec, 4, [*common, "--resume"])
checks.check(code == 0 and "resumed from" in out, f"evaluating the checkpoint: exit {code}\n{out[-2000:]}")
adjoin = accuracy(out)
r = subprocess.run(["/usr/bin/python3", twin, "--data", data, "--test-limit", "2000", "--batch", "50",
                    "--evaluate-checkpoint", path], capture_output=True, text=True, timeout=600)
checks.check(r.returncode == 0, f"the twin: exit {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
pytorch = accuracy(r.stdout)
print(f"t523: one checkpoint, 2,000 test images: adjoin 2x2 {adjoin}, PyTorch twin {pytorch}")
checks.check(adjoin == pytorch and adjoin != "test_accuracy=0.1000", f"adjoin {adjoin} != PyTorch {pytorch}")
shutil.rmtree(work, ignore_errors=True)
sys.exit(checks.finish())
