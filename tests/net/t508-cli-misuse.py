#!/usr/bin/env python3
"""t508: the command-line tools against careless flags and hostile files.

adjoin-train on a tiny data set this script writes itself (64 training and 32
test images): non-finite flags, out-of-range and conflicting flags (--lr 0,
--momentum 1, --momentum with Adam, --deep-halos with another model, a batch
larger than the training set), -h, rank counts without a default layout, a
checkpoint path in a missing directory or naming a FIFO, a metrics path that
cannot be written (at start or mid-run), a test set of another image size,
--stop-after-batches with --checkpoint-every or at the run's last batch, a
mid-epoch resume with another --batch, a resume of a finished run, a metrics
CSV with an absurd epoch, a diverging run; adjoin-dottest's --min-ranks,
--seed and --filter; adjoin-halo's overflowing sizes.  Each must end promptly with
a clear message and the documented exit code, and files the run does not own
stay byte-identical.

Usage: t508-cli-misuse.py MPIEXEC ADJOIN_TRAIN ADJOIN_DOTTEST ADJOIN_HALO"""
import os
import random
import struct
import subprocess
import sys
import tempfile

import train_cli

mpiexec, train, dottest, halo = sys.argv[1:5]
errors = 0


def check(ok, message):
    global errors
    if not ok:
        errors += 1
        print("FAIL:", message)


def run(args, ranks=1, timeout=120, env=None):
    cmd = [mpiexec, "-n", str(ranks), *args] if ranks else args
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    return r.returncode, r.stdout + r.stderr


def write_idx(path, dims, data):
    with open(path, "wb") as f:
        f.write(struct.pack(">I", 0x800 | len(dims)))
        for d in dims:
            f.write(struct.pack(">I", d))
        f.write(bytes(data))


def write_set(directory, prefix, count, side, rng):
    write_idx(f"{directory}/{prefix}-images-idx3-ubyte", [count, side, side],
              [rng.randrange(256) for _ in range(count * side * side)])
    write_idx(f"{directory}/{prefix}-labels-idx1-ubyte", [count], [rng.randrange(10) for _ in range(count)])


def expect(label, code, out, want_code, phrase):
    check(code == want_code and phrase in out, f"{label}: exit {code} (wanted {want_code}), output ends:\n{out[-600:]}")
    line = next((l for l in out.splitlines() if phrase in l), out.strip().splitlines()[-1] if out.strip() else "")
    print(f"{label:44s} exit {code}: {line.strip()[:150]}")


work = tempfile.mkdtemp(prefix="adjoin-t508-")
rng = random.Random(506)
data = f"{work}/data"
os.mkdir(data)
write_set(data, "train", 64, 28, rng)
write_set(data, "t10k", 32, 28, rng)
wide = f"{work}/wide"
os.mkdir(wide)
write_set(wide, "train", 64, 28, rng)
write_set(wide, "t10k", 32, 32, rng)
small = [train, "--data", data, "--batch", "8", "--epochs", "2", "--seed", "3", "--optimizer", "sgd", "--lr", "0.05"]

# Flags must be finite.
for flag, value in (("--weight-decay", "inf"), ("--lr", "nan"), ("--momentum", "-inf"), ("--lr", "1e999")):
    code, out = run([*small, flag, value])
    expect(f"{flag} {value}", code, out, 2, "finite")

# Choices outside their lists name the flag, the choices and the value.
for flag, value, phrase in (("--optimizer", "adamw", "--optimizer is sgd or adam, got 'adamw'"),
                            ("--lr-schedule", "linear", "--lr-schedule is constant or cosine, got 'linear'")):
    code, out = run([*small, flag, value])
    expect(f"{flag} {value}", code, out, 2, phrase)

# Values out of range name the flag and the value; -h is --help.
for args, phrase in ((["--lr", "0"], "--lr must be positive, got 0"),
                     (["--momentum", "1"], "--momentum must be below 1, got 1")):
    code, out = run([*small, *args])
    expect(" ".join(args), code, out, 2, phrase)
code, out = run([train, "-h"])
expect("-h", code, out, 0, "usage: mpiexec.mpich -n RANKS adjoin-train")

# Flags the chosen model or optimizer would ignore are refused, not dropped.
for args, phrase in ((["--model", "mlp", "--deep-halos"], "network shallowspeed has no convolution or pool"),
                     (["--optimizer", "adam", "--momentum", "0.9"], "--momentum 0.9 is SGD's")):
    code, out = run([*small, *args])
    expect(" ".join(args), code, out, 2, phrase)

# A batch larger than the training images in use would be mostly padding.
unused = f"{work}/big-batch.ckpt"
code, out = run([*small, "--train-limit", "16", "--batch", "100000", "--checkpoint", unused])
expect("--train-limit 16 --batch 100000", code, out, 2, "--batch 100000 is larger than the 16 training images")
check(not os.path.exists(unused), "the refused run left a checkpoint")

# Without --layout, a rank count with no default layout says so, rather than
# naming a layout the user never typed.
for model, ranks, phrase in (("lenet", 3, "no default lenet5 layout for 3 ranks; give --layout"),
                             ("encdec", 8, "no default encdec layout for 8 ranks; give --layout")):
    code, out = run([*small, "--model", model], ranks=ranks)
    expect(f"--model {model} on {ranks} ranks, no --layout", code, out, 2, phrase)

# Integer dtypes move data but cannot train: refused as a bad flag.
for value in ("i32", "uint8"):
    code, out = run([*small, "--dtype", value])
    expect(f"--dtype {value}", code, out, 2, "--dtype is f32 or f64")

# A checkpoint path that cannot work is refused before the first epoch.
code, out = run([*small, "--checkpoint", f"{work}/no-such-dir/run.ckpt"])
expect("--checkpoint in a missing directory", code, out, 1, "no-such-dir")
check("epoch" not in out.split("--checkpoint")[0], "the missing directory was found only after training")
fifo = f"{work}/fifo.ckpt"
os.mkfifo(fifo)
code, out = run([*small, "--checkpoint", fifo, "--resume"], ranks=2)
expect("--checkpoint naming a FIFO (2 ranks)", code, out, 1, "not a regular file")
check(os.path.exists(fifo) and not os.path.isfile(fifo), "the FIFO was replaced")

# A metrics path that cannot be written is refused before the first epoch,
# naming the path and the reason; nothing is written, not even the checkpoint.
unused = f"{work}/metrics-refused.ckpt"
for ranks in (1, 2):
    code, out = run([*small, "--metrics", f"{work}/no-such-dir/m.csv", "--checkpoint", unused], ranks=ranks)
    expect(f"--metrics in a missing directory ({ranks} rank{'s' if ranks > 1 else ''})", code, out, 1,
           f"cannot write the metrics file {work}/no-such-dir/m.csv: its directory {work}/no-such-dir does not exist")
    check("epoch" not in out and not os.path.exists(unused),
          "the unwritable metrics file was found only after training")


# A metrics write that fails mid-run fails the run on every rank, naming the
# file and the reason.  The metrics go to a tmpfs of one 4 KB page
# (train_cli.full_disk): the CSV fits, the plot (about 4 KB) does not.  A
# file-size limit (ulimit -f) would also bind the files MPICH, UCX and Open
# MPI back their shared memory with, and over TCP instead MPICH's UCX now and
# then spins in MPI_Finalize (openucx/ucx issue 8738); the limit is used for
# one rank only where no namespace can be made.
SMALL_FILES = 'trap "" XFSZ; ulimit -f 4; exec "$@"'
disk = f"{work}/full-disk"
prefix, why = train_cli.full_disk(disk)
for ranks in (1, 2):
    label = f"--metrics write failing mid-run ({ranks} rank{'s' if ranks > 1 else ''})"
    if prefix:
        cmd = [*prefix, mpiexec, "-n", str(ranks), *small, "--metrics", f"{disk}/limited.csv"]
        reason = f"cannot write the plot {disk}/limited.svg: No space left on device"
    elif ranks == 1:
        cmd = [mpiexec, "-n", "1", "sh", "-c", SMALL_FILES, "sh", *small, "--metrics", f"{work}/limited.csv"]
        reason = f"cannot write the plot {work}/limited.svg: File too large"
    else:
        print(f"{label}: skipped: no mount namespace here ({why})")
        continue
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    expect(label, r.returncode, r.stdout + r.stderr, 1, reason)
    check("test_accuracy=" not in r.stdout, "the run went on after the metrics failed")

# A test set of another image size is refused at start, naming the file.
code, out = run([train, "--data", wide, "--batch", "8", "--epochs", "1"])
expect("32x32 test set beside 28x28 training", code, out, 1, "t10k-images-idx3-ubyte")
check("[32, 32, 32]" in out, "the mismatch message does not give the test set's sizes")

# --stop-after-batches 4 --checkpoint-every 3: saved at batch 3, stopped at 4
# without saving (docs/training.md), so --resume continues from batch 3.
ckpt = f"{work}/run.ckpt"
code, out = run([*small, "--checkpoint", ckpt, "--checkpoint-every", "3", "--stop-after-batches", "4"])
expect("--stop-after-batches 4 --checkpoint-every 3", code, out, 3, "stopped after 4 batches")
code, out = run([*small, "--checkpoint", ckpt, "--checkpoint-every", "3", "--stop-after-batches", "0", "--resume"])
expect("  ... then --resume", code, out, 3, "at epoch 1, batch 3")

# A stop at the run's very last batch is a crash like any other: exit 3 and
# no checkpoint at that batch (even the run's first and only one), and a
# resume finishes with the uninterrupted run's checkpoint.
single = f"{work}/single.ckpt"
code, out = run([*small, "--train-limit", "8", "--epochs", "1", "--checkpoint", single, "--checkpoint-every", "1",
                 "--stop-after-batches", "1"])
expect("one-batch run, --stop-after-batches 1", code, out, 3, "stopped after 1 batch ")
check(not os.path.exists(single) and "test_accuracy=" not in out, "the stop at the only batch was not a stop")
whole, last = f"{work}/whole.ckpt", f"{work}/last.ckpt"
code, out = run([*small, "--checkpoint", whole])
check(code == 0, f"uninterrupted run: exit {code}")
code, out = run([*small, "--checkpoint", last, "--checkpoint-every", "5", "--stop-after-batches", "16"])
expect("--stop-after-batches 16 of 16", code, out, 3, "stopped after 16 batches")
code, out = run([*small, "--checkpoint", last, "--resume"])
expect("  ... then --resume", code, out, 0, "at epoch 2, batch 5")
with open(whole, "rb") as a, open(last, "rb") as b:
    check(a.read() == b.read(), "the resumed run's final checkpoint differs from the uninterrupted run's")

# Resuming a finished run trains nothing: not an error, but said on stderr,
# and the checkpoint stays as it was.
with open(whole, "rb") as f:
    before = f.read()
r = subprocess.run([mpiexec, "-n", "2", *small, "--checkpoint", whole, "--resume"], capture_output=True, text=True,
                   timeout=120)
expect("--resume of a finished run (2 ranks)", r.returncode, r.stderr, 0,
       f"note: {whole} already holds 2 epochs (--epochs 2): no training done")
with open(whole, "rb") as f:
    check(f.read() == before, "resuming the finished run changed its checkpoint")

# Resuming mid-epoch with another batch size would redo or skip samples.
with open(ckpt, "rb") as f:
    before = f.read()
args = [a if a != "8" else "16" for a in small]
code, out = run([*args, "--checkpoint", ckpt, "--resume"], ranks=2)
expect("mid-epoch --resume with --batch 16 (2 ranks)", code, out, 1, "same batch size")
with open(ckpt, "rb") as f:
    check(f.read() == before, "the refused checkpoint was changed")

# A metrics CSV with absurd epochs: the resumed run ignores those rows and
# the plot stays small.
csv = f"{work}/m.csv"
with open(csv, "w") as f:
    f.write("epoch,loss,train_acc,test_acc,seconds,images_per_s\n")
    f.write("-9223372036854775807,1.0,0.5,0.5,1.0,10.0\n1,nan,0.5,0.5,1.0,10.0\n9223372036854775807,1,1,1,1,1\n")
code, out = run([*small, "--checkpoint", ckpt, "--resume", "--metrics", csv], timeout=60)
expect("--resume with absurd epochs in the CSV", code, out, 0, "test_accuracy=")
svg = f"{work}/m.svg"
size = os.path.getsize(svg) if os.path.exists(svg) else -1
check(0 < size < 20000, f"the plot is {size} bytes")
print(f"{'':44s} plot {size} bytes, CSV rows: {open(csv).read().count(chr(10)) - 1}")

# Divergence stops the run with a clear error and a non-zero exit.
code, out = run([train, "--data", data, "--batch", "8", "--epochs", "2", "--optimizer", "sgd", "--lr", "1e6"])
expect("--optimizer sgd --lr 1e6", code, out, 1, "diverged")

# adjoin-dottest: bad numbers are refused; a filter that matches nothing fails.
for args, want, phrase in ((["--min-ranks", "abc"], 2, "--min-ranks 'abc' is not a whole number"),
                           (["--min-ranks", "-1"], 2, "--min-ranks '-1' is not a whole number"),
                           (["--min-ranks", "4294967297"], 2, "--min-ranks '4294967297' is out of range 0..2147483647"),
                           (["--seed", "abc"], 2, "--seed 'abc' is not a whole number"),
                           (["--seed", "-5"], 2, "--seed '-5' is not a whole number"),
                           (["--seed", "18446744073709551616"], 2, "out of range 0..18446744073709551615"),
                           (["--filter", "no-such-case"], 1, "no case matches")):
    code, out = run([dottest, *args])
    expect(f"adjoin-dottest {' '.join(args)}", code, out, want, phrase)

# adjoin-dottest --net --placement all on 2 ranks proves the 1-rank
# placements with rank 1 waiting: every rank exits 0 when all pass.
tiny = f"{work}/tiny.net"
with open(tiny, "w") as f:
    f.write("input 6\nfc a out=4\nrelu\nfc b out=3\nloss type=xent\n")
code, out = run([dottest, "--net", tiny, "--placement", "all"], ranks=2)
expect("adjoin-dottest --net --placement all (2 ranks)", code, out, 0, " passed, 0 failed")

# --openblas-coretype answers without mpiexec: the kernels a training run's
# note advises (one OpenBLAS name) or nothing when it advises none, and
# nothing once OPENBLAS_CORETYPE is set, since the user's choice stands.
env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
r = subprocess.run([train, "--openblas-coretype"], capture_output=True, text=True, timeout=60, env=env)
answer = r.stdout.strip()
code, out = run([*small, "--epochs", "1"], env=env)
note = next((l for l in out.splitlines() if "OPENBLAS_CORETYPE=" in l), "")
advised = note.split("OPENBLAS_CORETYPE=")[1].split()[0] if note else ""
check(r.returncode == 0 and r.stderr == "" and answer in ("", "SkylakeX", "Haswell") and answer == advised,
      f"--openblas-coretype: exit {r.returncode}, printed '{r.stdout}' '{r.stderr}', a run's note advises '{advised}'")
print(f"{'adjoin-train --openblas-coretype':44s} exit {r.returncode}: '{answer}' (a run advises '{advised}')")
r = subprocess.run([train, "--openblas-coretype"], capture_output=True, text=True, timeout=60,
                   env=dict(env, OPENBLAS_CORETYPE="Prescott"))
check(r.returncode == 0 and r.stdout == "", f"--openblas-coretype with OPENBLAS_CORETYPE set printed '{r.stdout}'")
print(f"{'  ... with OPENBLAS_CORETYPE=Prescott':44s} exit {r.returncode}: '{r.stdout.strip()}'")

# adjoin-halo: sizes that overflow 64-bit indices or an int worker count.
code, out = run([halo, "--shape", "9223372036854775807", "--kernel", "3", "--padding", "9223372036854775807"], ranks=0)
expect("adjoin-halo --padding 2^63-1", code, out, 1, "overflow")
check("output_shape" not in out, "adjoin-halo printed JSON for an overflowing size")
code, out = run([halo, "--shape", "8", "--partition", "4294967298"], ranks=0)
expect("adjoin-halo --partition 4294967298", code, out, 2, "'4294967298' is out of range 1..1048576")

subprocess.run(["rm", "-rf", work])
print(f"t508: {'FAIL' if errors else 'ok'} ({errors} failures)")
sys.exit(1 if errors else 0)
