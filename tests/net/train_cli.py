"""Helpers of the tests that drive adjoin-train end to end (t508, t510, t511,
t516, t522, ...): a run under mpiexec, a checkpoint read back
(docs/checkpoint.md, versions 2 and 3), an error count that becomes the exit
code, a directory that is a full disk; the arguments every script takes."""
import os
import struct
import subprocess
import sys
import zlib


def arguments(name, data_set="mnist"):
    """(mpiexec, program, data directory) from argv; exits 77 (skipped) when
    the data directory holds no provisioned DATA_SET (raw or gzipped)."""
    mpiexec, program, data = sys.argv[1:4]
    images = f"{data}/train-images-idx3-ubyte"
    if not (os.access(images, os.R_OK) or os.access(images + ".gz", os.R_OK)):
        print(f"{name}: skipped: no {data_set} under {data}: provision it with "
              f"`sh tools/provision-data.sh {data_set}`")
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


def full_disk(directory):
    """(prefix, why): a command prefix under which DIRECTORY (made here) is a
    tmpfs of one 4 KB page, mounted in a mount namespace of the command's own
    (unshare -m; needs root), so a file written there past 4 KB fails with
    ENOSPC while the MPI library's shared memory works as ever; (None, the
    reason) where no namespace can be made."""
    os.makedirs(directory, exist_ok=True)
    prefix = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=4k adjoin-test "$0" && exec "$@"', directory]
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True)
    return (prefix, "") if probe.returncode == 0 else (None, probe.stderr.strip())


def run(mpiexec, ranks, args, timeout=600):
    """(exit code, stdout + stderr) of adjoin-train ARGS on RANKS ranks."""
    r = subprocess.run([mpiexec, "-n", str(ranks), *args], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def read_checkpoint(path):
    """The checkpoint at PATH as a dict: header fields, the generator state
    (bytes), per parameter its name, global shape, and values followed by
    the optimizer's state buffers (one flat tuple of floats), and (version 3)
    the network's state buffers as (name, values) pairs."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"ADJCKPT\n", f"{path}: not a checkpoint"
    assert zlib.crc32(data[:-4]) == struct.unpack("<I", data[-4:])[0], f"{path}: CRC32 mismatch"
    version, dtype, kind, k, count, rng_bytes = struct.unpack_from("<6I", data, 8)
    assert version in (2, 3), f"{path}: version {version}, expected 2 or 3"
    steps, epoch, batch, seed, batch_size = struct.unpack_from("<5Q", data, 32)
    pos = 72 + rng_bytes
    ck = {"dtype": dtype, "optimizer": kind, "steps": steps, "epoch": epoch, "batch": batch, "seed": seed,
          "batch_size": batch_size, "rng": data[72:pos], "parameters": [], "state": [], "version": version}
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
    if version == 3:
        (buffers,) = struct.unpack_from("<I", data, pos)
        pos += 4
        for _ in range(buffers):
            (length,) = struct.unpack_from("<I", data, pos)
            name = data[pos + 4:pos + 4 + length].decode()
            (n,) = struct.unpack_from("<Q", data, pos + 4 + length)
            pos += 12 + length
            ck["state"].append((name, struct.unpack_from(f"<{n}d", data, pos)))
            pos += 8 * n
    assert pos == len(data) - 4, f"{path}: {len(data) - 4 - pos} bytes left over"
    return ck


def relative_difference(a, b):
    """||a - b|| / ||b|| over every parameter, optimizer state and network
    state value."""
    num = den = 0.0
    pairs = [(p["values"], q["values"]) for p, q in zip(a["parameters"], b["parameters"])]
    pairs += [(p[1], q[1]) for p, q in zip(a["state"], b["state"])]
    for values, reference in pairs:
        num += sum((x - y) ** 2 for x, y in zip(values, reference))
        den += sum(y * y for y in reference)
    return (num / den) ** 0.5 if den else num ** 0.5
