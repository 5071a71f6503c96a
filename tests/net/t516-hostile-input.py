#!/usr/bin/env python3
"""t516: the programs against hostile input, one case or more of each class of
docs/robustness.md's "Hostile input" section:

1. numbers that overflow or truncate: a grid 4294967297x1, --micro-batches past
   int or past --batch, a network whose weight count or padded extent
   overflows int64, adjoin-phantom --n 4000000000, adjoin-plan --sweep 1:4
   (no NaN), 2^32 + 1 where an int is stored, calibration values past range;
2. special files: --trace /dev/full, --trace naming a FIFO with no reader, a
   --trace-events write that fails mid-run (a file size limit), adjoin-plan's network
   file and calibration file as a FIFO, a device or a directory, --calibrate
   onto /dev/full, a tool's answer to stdout on /dev/full;
4. messages that name the value the user gave: --replicas 3 with a 1x2 grid.
(Class 3, tools inside an MPI job, is t518.)

Each refusal must come with the documented exit status and a message naming
the value and its source; under mpiexec every rank exits with that status
(each rank reports its own, through a shell around the program) and one rank
speaks; nothing hangs (a FIFO is still a FIFO afterwards); the programs that
never start MPI refuse within a second.  Times are printed.

Usage: t516-hostile-input.py MPIEXEC ADJOIN_TRAIN ADJOIN_DOTTEST ADJOIN_HALO ADJOIN_PLAN ADJOIN_PHANTOM NETWORKS_DIR"""
import os
import random
import stat
import struct
import subprocess
import sys
import tempfile
import time

import train_cli

mpiexec, train, dottest, halo, plan, phantom, networks = sys.argv[1:8]
errors = 0
lenet = os.path.join(networks, "lenet5.net")


def check(ok, message):
    global errors
    if not ok:
        errors += 1
        print("FAIL:", message)


# Each rank's exit status, on stderr, so "every rank exits alike" is seen
# rather than inferred from mpiexec's own status.  Open MPI's launcher ends
# the job as soon as one rank exits non-zero, so each rank, once it has
# reported, waits (up to 10 s) until every rank has: a file per rank in the
# run's directory, the shell's first argument.
RANK_STATUS = """d=$1; shift; "$@"; s=$?
r=${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-?}} n=${PMI_SIZE:-${OMPI_COMM_WORLD_SIZE:-1}}
echo "t516-rank $r exit $s" >&2; : > "$d/rank-$r"
i=0; while [ "$(ls "$d" | wc -l)" -lt "$n" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done; exit $s"""


def run(args, ranks=0, env=None, limit=None, timeout=60, prefix=()):
    """(exit status, output, seconds, per-rank statuses) of args, under
    mpiexec -n ranks when ranks > 0.  limit: a file size limit in 512-byte
    blocks on each rank (not on the launcher, whose runtime writes files of
    its own), SIGXFSZ ignored so a write past it fails with EFBIG.  prefix:
    words run before the command (train_cli.full_disk's)."""
    wrapper = (f'trap "" XFSZ; ulimit -f {limit}; ' if limit else "") + RANK_STATUS
    reported = tempfile.mkdtemp(prefix="ranks-", dir=work)
    cmd = [mpiexec, "-n", str(ranks), "sh", "-c", wrapper, "sh", reported, *args] if ranks else list(args)
    cmd = [*prefix, *cmd]
    start = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    seconds = time.monotonic() - start
    out = r.stdout + r.stderr
    statuses = [int(l.split()[-1]) for l in out.splitlines() if l.startswith("t516-rank ")]
    shown = "\n".join(l for l in out.splitlines() if not l.startswith("t516-rank "))
    return r.returncode, shown, seconds, statuses


def expect(label, args, want, phrases, ranks=0, env=None, limit=None, most_seconds=None, absent=(), prefix=()):
    """args exits `want` (on every rank), its output holds every phrase (one
    rank speaks: the first phrase appears once), none of `absent`."""
    code, out, seconds, statuses = run(args, ranks, env, limit, prefix=prefix)
    if most_seconds is None:
        most_seconds = 1.0 if not ranks else 30.0
    first = out.count(phrases[0])
    ok = code == want and all(p in out for p in phrases) and (not ranks or first == 1)
    ok = ok and not any(a in out for a in absent) and seconds <= most_seconds
    if ranks:
        ok = ok and len(statuses) == ranks and all(s == want for s in statuses)
    check(ok, f"{label}: exit {code} (wanted {want}), ranks {statuses}, {seconds:.2f} s (at most {most_seconds}), "
              f"'{phrases[0]}' {first} times; output:\n{out[-900:]}")
    line = next((l for l in out.splitlines() if phrases[0] in l), out.strip().splitlines()[0] if out.strip() else "")
    where = f"{ranks} ranks {statuses}" if ranks else "1 process"
    print(f"{label:46s} exit {code} ({where}, {seconds:.3f} s): {line.strip()[:140]}")
    return out


def write_idx(path, dims, data):
    with open(path, "wb") as f:
        f.write(struct.pack(">I", 0x800 | len(dims)))
        for d in dims:
            f.write(struct.pack(">I", d))
        f.write(bytes(data))


work = tempfile.mkdtemp(prefix="adjoin-t516-")
rng = random.Random(516)
data = f"{work}/data"
os.mkdir(data)
for prefix, count in (("train", 64), ("t10k", 32)):
    write_idx(f"{data}/{prefix}-images-idx3-ubyte", [count, 28, 28], [rng.randrange(256) for _ in range(count * 784)])
    write_idx(f"{data}/{prefix}-labels-idx1-ubyte", [count], [rng.randrange(10) for _ in range(count)])
small = [train, "--data", data, "--batch", "8", "--epochs", "1", "--optimizer", "sgd", "--lr", "0.05"]
fifo = f"{work}/fifo"
os.mkfifo(fifo)


def write(name, text):
    path = f"{work}/{name}"
    with open(path, "w") as f:
        f.write(text)
    return path


print("-- 1: numbers that overflow or truncate")
expect("train --layout 4294967297x1 (LeNet-5)", [*small, "--layout", "4294967297x1"], 2,
       ["placement '4294967297x1': entry 1 '4294967297' is out of range 1..4096"], ranks=2)
expect("train --model mlp --layout 4294967297x1", [*small, "--model", "mlp", "--layout", "4294967297x1"], 2,
       ["placement '4294967297x1': entry 1 '4294967297' is out of range 1..4096"], ranks=2)
expect("train --micro-batches 2^63-1", [*small, "--micro-batches", "9223372036854775807"], 2,
       ["--micro-batches needs an integer from 1 to 2147483647, got '9223372036854775807'"], ranks=2)
expect("train --micro-batches 2^31-1 (past --batch)", [*small, "--layout", "dp", "--micro-batches", "2147483647"], 2,
       ["--micro-batches 2147483647 on 2 replicas makes more passes per step than the 8 samples of --batch"],
       ranks=2)
expect("train --replicas 2^32+1", [*small, "--replicas", "4294967297"], 2,
       ["--replicas needs an integer from 1 to 2147483647, got '4294967297'"], ranks=2)
fc = write("fc-overflow.net", "input 2147483648 3 3\nconv c out=2147483648 k=3\n")
expect("plan: conv weights beyond int64", [plan, "--procs", "4", "--batch", "64", fc], 1,
       [f"{fc}:2: conv c weight: ", "is beyond int64"], absent=["parameters)"])
conv = write("conv-overflow.net", "input 2147483648 2147483648 2147483648\nconv c out=2 k=3 p=1\n")
expect("plan: activation beyond int64", [plan, "--procs", "4", "--batch", "64", conv], 1,
       [f"{conv}:1: input: its per-sample activation: "])
huge = write("huge.net", "input 1 8 8\nconv c out=2 k=3 p=9223372036854775807\n")
expect("plan: padding past the extent limit", [plan, "--procs", "4", "--batch", "64", huge], 1,
       [f"{huge}:2: conv c p '9223372036854775807' is out of range 0..1048576"])
expect("plan --grid 4294967297x1", [plan, "--procs", "4", "--batch", "64", "--grid", "4294967297x1", lenet], 2,
       ["--grid '4294967297x1': entry 1 '4294967297' is out of range 1..16777216"])
expect("plan --procs 2^64", [plan, "--procs", "18446744073709551616", "--batch", "64", lenet], 2,
       ["--procs '18446744073709551616' is out of range 1..16777216"])
out = expect("plan --sweep 1:4 (no NaN)", [plan, "--batch", "64", "--sweep", "1:4", lenet], 0, ["     1       1x1"])
check("nan" not in out.lower(), f"--sweep 1:4 printed a NaN:\n{out}")
out = expect("plan --all-grids --procs 1 (no NaN)", [plan, "--batch", "64", "--procs", "1", "--all-grids", lenet], 0,
             ["1x1"])
check("nan" not in out.lower(), f"--all-grids --procs 1 printed a NaN:\n{out}")
expect("phantom --n 4000000000", [phantom, "--n", "4000000000"], 2,
       ["--n 4000000000 with --layers 2: the dense model's 2 x 4000000000 x 4000000000 parameters"],
       absent=["model size"])
expect("phantom --p 2^32+1", [phantom, "--p", "4294967297"], 2, ["--p '4294967297' is out of range 1..1048576"])
expect("phantom --tp-times 1,nan", [phantom, "--tp-times", "1,nan"], 2,
       ["--tp-times '1,nan': entry 2 'nan' is not a finite number"])
expect("halo --shape 2^64", [halo, "--shape", "18446744073709551616"], 2,
       ["--shape '18446744073709551616': entry 1 '18446744073709551616' is out of range"])
expect("halo --cuts 0:4:2^64", [halo, "--shape", "8", "--partition", "2", "--cuts", "0:4:18446744073709551616"], 2,
       ["--cuts of dimension 0 '0:4:18446744073709551616': entry 3"])
expect("dottest --seed 2^64", [dottest, "--seed", "18446744073709551616"], 2,
       ["--seed '18446744073709551616' is out of range 0..18446744073709551615"], ranks=2)
calibration = write("calibration-huge.txt", "alpha 1e-6\nbeta 1e999\n")
expect("plan --calibration beta 1e999", [plan, "--procs", "4", "--batch", "64", "--calibration", calibration, lenet],
       2, ["line 2: beta '1e999' is not a finite number"])
calibration = write("calibration-ranks.txt",
                    "alpha 1e-6\nbeta 1e-9\nallreduce_alpha 1e-6\nallreduce_beta 1e-9\nallreduce_ranks 4294967298\n")
expect("plan --calibration allreduce_ranks 2^32+2",
       [plan, "--procs", "4", "--batch", "64", "--calibration", calibration, lenet], 2,
       ["line 5: allreduce_ranks 4294967298 must be > 0 (an integer >= 2)"])

print("-- 2: special files")
expect("train --trace /dev/full", [*small, "--trace", "/dev/full"], 1,
       ["--trace /dev/full: exists and is a character device, not a regular file"], ranks=2,
       absent=["test_accuracy="])
expect("train --trace FIFO without a reader", [*small, "--trace", fifo], 1,
       [f"--trace {fifo}: exists and is a FIFO, not a regular file"], ranks=2, absent=["test_accuracy="])
check(stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO named by --trace was replaced")
# An event-list write that fails mid-run (the run's trace is about 7 KB): every
# rank exits 1, naming the file and the reason.  The trace goes to a one-page
# tmpfs where a mount namespace can be made (root).  Elsewhere a 2,048-byte
# file size limit fails it; MPICH, UCX and Open MPI back shared memory with
# files the limit would refuse, so those runs talk over TCP, where MPICH's
# UCX now and then spins in MPI_Finalize (openucx/ucx issue 8738).
disk = f"{work}/full-disk"
prefix, _ = train_cli.full_disk(disk)
if prefix:
    trace = f"{disk}/limited-trace.txt"
    expect("train --trace-events failing mid-run", [*small, "--layout", "dp", "--trace-events", trace], 1,
           [f"--trace-events {trace}: writing it failed: No space left on device"], ranks=2, prefix=prefix)
else:
    tcp = dict(os.environ, UCX_TLS="self,tcp", MPIR_CVAR_NOLOCAL="1", OMPI_MCA_btl="self,tcp")
    trace = f"{work}/limited-trace.txt"
    expect("train --trace-events failing mid-run", [*small, "--layout", "dp", "--trace-events", trace], 1,
           [f"--trace-events {trace}: writing it failed: File too large"], ranks=2, env=tcp, limit=4)
for name, path, kind in (("FIFO", fifo, "is a FIFO"), ("/dev/zero", "/dev/zero", "is a character device"),
                         ("directory", work, "is a directory")):
    expect(f"plan: network file is a {name}", [plan, "--procs", "4", "--batch", "64", path], 1,
           [f"network file {path}: {kind}, not a regular file"])
    expect(f"plan: --calibration is a {name}", [plan, "--procs", "4", "--batch", "64", "--calibration", path, lenet],
           2, [f"calibration file {path}: {kind}, not a regular file"])
check(stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO read as a network file was replaced")
expect("plan --calibrate /dev/full (before measuring)", [plan, "--calibrate", "/dev/full"], 1,
       ["--calibrate /dev/full: exists and is a character device"], ranks=2, absent=["ping-pong"])
expect("plan --calibrate into a missing directory", [plan, "--calibrate", f"{work}/no-such-dir/cal.txt"], 1,
       [f"its directory {work}/no-such-dir does not exist"], ranks=2)
for label, args in (("halo", [halo, "--shape", "8"]), ("plan", [plan, "--procs", "2", "--batch", "8", lenet]),
                    ("phantom", [phantom, "--n", "64", "--p", "2", "--k", "2"])):
    start = time.monotonic()
    with open("/dev/full", "w") as full:
        r = subprocess.run(args, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    seconds = time.monotonic() - start
    ok = r.returncode == 1 and "writing the output failed: No space left on device" in r.stderr and seconds < 1
    check(ok, f"{label} > /dev/full: exit {r.returncode} after {seconds:.2f} s: {r.stderr!r}")
    print(f"{label + ' > /dev/full':46s} exit {r.returncode} (1 process, {seconds:.3f} s): {r.stderr.strip()[:140]}")

print("-- 4: messages name the value given")
expect("train --replicas 3 with grid 1x2 on 2 ranks", [*small, "--model", "mlp", "--replicas", "3", "--layout", "1x2"],
       2, ["2 ranks do not divide into --replicas 3 of layout 1x2 (6 replicas of 1x1"], ranks=2)
expect("train --replicas 2 with dist2 on 3 ranks", [*small, "--replicas", "2", "--layout", "dist2"], 2,
       ["3 ranks do not divide into --replicas 2 of layout dist2"], ranks=3)

subprocess.run(["rm", "-rf", work])
print(f"t516: {'FAIL' if errors else 'ok'} ({errors} failures)")
sys.exit(1 if errors else 0)
