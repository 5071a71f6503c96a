"""Helpers of the tests that drive adjoin-train end to end (t510, t511): a
run under mpiexec, a checkpoint read back (docs/checkpoint.md, version 2), and
an error count that becomes the exit code; the arguments every script takes."""
import os
import struct
import subprocess
import sys
import zlib


def arguments(name):
    """(mpiexec, program, data directory) from argv; exits 77 (skipped) when
    the data directory holds no provisioned MNIST."""
    mpiexec, program, data = sys.argv[1:4]
    if not os.access(f"{data}/train-images-idx3-ubyte", os.R_OK):
        print(f"{name}: skipped: no MNIST under {data}: provision it with `sh tools/provision-data.sh mnist`")
        sys.exit(77)
    return mpiexec, program, data


class Checks:
    """Counts failed checks; each failure prints its message."""

    def __init__(self, name):
        self.name, self.errors = name, 0

    def check(self, ok, message):
        if not ok:
            self.errors += 1
            print(f"{self.name}: FAIL: {message}")
        return ok

    def finish(self):
        print(f"{self.name}: {'Found %d errors' % self.errors if self.errors else 'No Errors'}")
        return 1 if self.errors else 0


def run(mpiexec, ranks, args, timeout=600):
    """(exit code, stdout + stderr) of adjoin-train ARGS on RANKS ranks."""
    r = subprocess.run([mpiexec, "-n", str(ranks), *args], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def read_checkpoint(path):
    """The checkpoint at PATH as a dict: header fields, the generator state
    (bytes), and per parameter its name, global shape, and values followed by
    the optimizer's state buffers (one flat tuple of floats)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"ADJCKPT\n", f"{path}: not a checkpoint"
    assert zlib.crc32(data[:-4]) == struct.unpack("<I", data[-4:])[0], f"{path}: CRC32 mismatch"
    version, dtype, kind, k, count, rng_bytes = struct.unpack_from("<6I", data, 8)
    assert version == 2, f"{path}: version {version}, expected 2"
    steps, epoch, batch, seed, batch_size = struct.unpack_from("<5Q", data, 32)
    pos = 72 + rng_bytes
    ck = {"dtype": dtype, "optimizer": kind, "steps": steps, "epoch": epoch, "batch": batch, "seed": seed,
          "batch_size": batch_size, "rng": data[72:pos], "parameters": []}
    for _ in range(count):
        (length,) = struct.unpack_from("<I", data, pos)
        name = data[pos + 4:pos + 4 + length].decode()
        pos += 4 + length
        (rank,) = struct.unpack_from("<I", data, pos)
        shape = struct.unpack_from(f"<{rank}Q", data, pos + 4)
        pos += 4 + 8 * rank
        ck["parameters"].append({"name": name, "shape": shape})
    for p in ck["parameters"]:
        n = 1
        for e in p["shape"]:
            n *= e
        p["volume"] = n
        p["values"] = struct.unpack_from(f"<{n * (1 + k)}d", data, pos)
        pos += 8 * n * (1 + k)
    return ck


def relative_difference(a, b):
    """||a - b|| / ||b|| over every parameter and optimizer state value."""
    num = den = 0.0
    for p, q in zip(a["parameters"], b["parameters"]):
        num += sum((x - y) ** 2 for x, y in zip(p["values"], q["values"]))
        den += sum(y * y for y in q["values"])
    return (num / den) ** 0.5 if den else num ** 0.5
