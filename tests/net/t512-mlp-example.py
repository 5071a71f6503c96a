#!/usr/bin/env python3
"""t512: example-mlp-dp, ShallowSpeed's MLP (784-128-127-126-125-124-123-10,
global batch 128 in 4 micro-batches, SGD 0.006), trained data parallel on 1,
2, 4 and 8 ranks on the first 1024 provisioned digits for 2 epochs.  Every
rank count trains the same global batches, so each epoch's loss equals the
1-rank run's (float32: within 1e-5 relative) and the test accuracy within
0.1 point; the replicas end in sync (the example's assert_sync), and the
reducer moves the MLP's parameter bytes once per step (payload).
Skipped (77) when data/mnist has not been provisioned.

Usage: t512-mlp-example.py MPIEXEC EXAMPLE_MLP_DP DATA_DIR"""
import re
import sys

from train_cli import arguments, Checks, run

mpiexec, example, data = arguments("t512")
SIZES = [784, 128, 127, 126, 125, 124, 123, 10]
PARAMETER_BYTES = 4 * sum(n_in * n_out + n_out for n_in, n_out in zip(SIZES, SIZES[1:]))
EPOCH = re.compile(r"epoch (\d+): loss ([\d.]+), test accuracy ([\d.]+), .* reducer per step (\d+) bytes")
checks = Checks("t512")
reference = None
for ranks in (1, 2, 4, 8):
    code, out = run(mpiexec, ranks, [example, data, "2", "1", "1024"])
    epochs = [(float(m.group(2)), float(m.group(3)), int(m.group(4))) for m in EPOCH.finditer(out)]
    if not checks.check(code == 0 and len(epochs) == 2 and "replicas in sync" in out,
                        f"{ranks} ranks: exit {code}, {len(epochs)} epochs:\n{out[-800:]}"):
        continue
    reference = reference or epochs
    worst_loss = max(abs(e[0] - r[0]) / r[0] for e, r in zip(epochs, reference))
    worst_accuracy = max(abs(e[1] - r[1]) for e, r in zip(epochs, reference))
    print(f"t512: {ranks} rank{'s' if ranks > 1 else ' '}: losses {[e[0] for e in epochs]}, test accuracies "
          f"{[e[1] for e in epochs]}; against 1 rank: loss {worst_loss:.1e} relative, accuracy {worst_accuracy:.4f}; "
          f"reducer {epochs[-1][2]} bytes per step (parameters {PARAMETER_BYTES})")
    checks.check(worst_loss <= 1e-5, f"{ranks} ranks: loss differs from 1 rank's by {worst_loss:.2e} relative")
    checks.check(worst_accuracy <= 0.001, f"{ranks} ranks: test accuracy differs from 1 rank's by {worst_accuracy}")
    want = PARAMETER_BYTES if ranks > 1 else 0
    checks.check(all(e[2] == want for e in epochs), f"{ranks} ranks: reducer bytes {[e[2] for e in epochs]}, not {want}")
sys.exit(checks.finish())
