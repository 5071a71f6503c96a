#!/usr/bin/env python3
"""t231: adjoin-halo prints the geometry of figure B3 as JSON, orders workers
row-major with per-dimension ranges, and fails with a message on stderr for a
configuration it cannot serve.  Usage: t231-halo-tool.py path/to/adjoin-halo"""
import json
import subprocess
import sys

tool = sys.argv[1]
errors = 0


def check(ok, message):
    global errors
    if not ok:
        errors += 1
        print("FAIL:", message)


def run(*args):
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=30)


# Figure B3: n=11, P=3, k=5, no padding.
r = run("--shape", "11", "--partition", "3", "--kernel", "5")
check(r.returncode == 0, f"B3 exited {r.returncode}: {r.stderr}")
b3 = json.loads(r.stdout)
check(b3["output_shape"] == [7], f"B3 output shape {b3['output_shape']}")
expected = [  # bulk, output, needed, halo, trim
    ([0, 4], [0, 3], [0, 7], [0, 3], [0, 0]),
    ([4, 8], [3, 5], [3, 9], [1, 1], [0, 0]),
    ([8, 11], [5, 7], [5, 11], [3, 0], [0, 0]),
]
check(len(b3["workers"]) == 3, f"B3 has {len(b3['workers'])} workers")
for w, (worker, e) in enumerate(zip(b3["workers"], expected)):
    d = worker["dims"][0]
    got = (d["bulk"], d["output"], d["needed"], d["halo"], d["trim"])
    check(worker["coords"] == [w], f"B3 worker {w} coords {worker['coords']}")
    check(got == e, f"B3 worker {w}: {got}, expected {e}")
print("B3 via adjoin-halo:", [w["dims"][0]["halo"] for w in b3["workers"]])

# 2-D with a batch-like dimension, L:R padding and explicit cuts: row-major
# coordinates, dimensions independent, padding not counted as data.
r = run("--shape", "2,11", "--partition", "2,2", "--kernel", "1,4", "--padding", "0,1:2", "--cuts", "-,0:8:11")
check(r.returncode == 0, f"2-D exited {r.returncode}: {r.stderr}")
g = json.loads(r.stdout)
coords = [w["coords"] for w in g["workers"]]
check(coords == [[0, 0], [0, 1], [1, 0], [1, 1]], f"worker order {coords}")
check(g["output_shape"] == [2, 11], f"2-D output shape {g['output_shape']}")
for w in g["workers"]:
    batch, cols = w["dims"]
    check(batch["halo"] == [0, 0] and batch["needed"] == batch["bulk"], f"batch dim of {w['coords']}: {batch}")
    want = ([0, 0], [0, 8]) if w["coords"][1] == 0 else ([3, 0], [5, 11])
    check((cols["halo"], cols["needed"]) == want, f"cols of {w['coords']}: {cols}")

# A kernel wider than the padded input: non-zero exit, message naming the
# dimension and both sizes, nothing on stdout.
r = run("--shape", "8,3", "--partition", "2,1", "--kernel", "3,5", "--padding", "1,0:0")
check(r.returncode != 0, "an impossible geometry must exit non-zero")
check("dimension 1" in r.stderr and "spans 5" in r.stderr and "only 3" in r.stderr, f"stderr: {r.stderr!r}")
check(r.stdout == "", f"stdout on error: {r.stdout!r}")
print("error case:", r.returncode, r.stderr.strip())

# A list of the wrong length is a usage error.
r = run("--shape", "8,3", "--kernel", "3")
check(r.returncode != 0 and "--kernel has 1 entries" in r.stderr, f"usage error: {r.returncode} {r.stderr!r}")

print("t231-halo-tool:", "No Errors" if errors == 0 else f"Found {errors} errors")
sys.exit(1 if errors else 0)
