#!/usr/bin/env python3
"""t524: a phantom-parallel network described in a file trains.

adjoin-train --net networks/phantom.net (two phantom layers of width 256
between affine layers, paper 003) at its placements p2 and p4, each proven
first by --check (the Jacobian dot-product test and distributed ==
sequential in float64 on the first batch), then trained in float32 with
Adam for 2 epochs on 4,000 of the provisioned digits.  The library draws
the phantom layers' parameters so that each starts like the dense layer it
stands for (network.h); the run must reach 80% test accuracy on 1,000 test
digits (measured about 87%; chance is 10%).
Skipped (77) when data/mnist has not been provisioned.

Usage: t524-phantom-train.py MPIEXEC ADJOIN_TRAIN DATA_DIR NETWORK_FILE"""
import re
import sys

from train_cli import arguments, Checks, run

mpiexec, train, data = arguments("t524")
network = sys.argv[4]
LEAST_ACCURACY = 0.80
checks = Checks("t524")
common = [train, "--data", data, "--net", network, "--check", "--epochs", "2", "--train-limit", "4000",
          "--test-limit", "1000", "--batch", "64", "--seed", "3"]

for placement, ranks in [("p2", 2), ("p4", 4)]:
    code, out = run(mpiexec, ranks, [*common, "--placement", placement])
    proof = [line for line in out.splitlines() if line.startswith("check: ")]
    accuracy = re.findall(r"^test_accuracy=([0-9.]+)$", out, re.M)
    print(f"t524: phantom.net at {placement} on {ranks} ranks: exit {code}, "
          f"test_accuracy={accuracy[-1] if accuracy else 'none'}")
    if proof:
        print(f"t524:   {proof[0]}")
    checks.check(code == 0, f"{placement}: exit {code}\n{out[-2000:]}")
    checks.check(bool(proof) and proof[0].endswith(": proven"), f"{placement}: --check did not prove it\n{out[-2000:]}")
    checks.check(bool(accuracy) and float(accuracy[-1]) >= LEAST_ACCURACY,
                 f"{placement}: test accuracy {accuracy[-1] if accuracy else 'none'} below {LEAST_ACCURACY}")

sys.exit(checks.finish())
