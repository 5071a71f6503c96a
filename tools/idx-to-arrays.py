#!/usr/bin/python3
"""Converts a directory of the four standard IDX files (MNIST, Fashion-MNIST;
raw or .gz) into the array formats adjoin reads (docs/data.md):

  DEST/train-inputs.npy  DEST/train-targets.npy    (--format npy)
  DEST/test-inputs.npy   DEST/test-targets.npy
  DEST/train.h5  DEST/test.h5, datasets /inputs and /targets   (--format hdf5)

Inputs become (N, 1, H, W): uint8 pixel bytes by default (adjoin scales
uint8 inputs to b / 255 in float32, exactly as it reads IDX images), or with
--inputs float32 the scaled values themselves, b / 255 computed in float32.
Either way a run on the converted files equals the run on the IDX files bit
for bit.  Targets are the labels as int64, shape (N).

  python3 tools/idx-to-arrays.py data/fashion-mnist build/fashion-npy
  python3 tools/idx-to-arrays.py --format hdf5 --inputs float32 data/mnist build/mnist-h5

Needs python3-numpy, and python3-h5py for HDF5 (sh tools/install-deps.sh).
Exit status 0 when done, 1 when a file is missing or malformed (the message
names it), 2 on bad arguments.
"""
import argparse
import gzip
import os
import sys

import numpy as np

SPLITS = {"train": "train", "test": "t10k"}


def fail(message):
    print(f"idx-to-arrays: {message}", file=sys.stderr)
    sys.exit(1)


def find(source, name):
    """source/name, or source/name.gz when only that exists."""
    for path in (os.path.join(source, name), os.path.join(source, name + ".gz")):
        if os.path.isfile(path):
            return path
    fail(f"neither {os.path.join(source, name)} nor its .gz is there")


def read_idx(path, ndims):
    """An unsigned-byte IDX file of ndims dimensions, checked as adjoin checks it."""
    with open(path, "rb") as f:
        raw = f.read()
    data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    magic = int.from_bytes(data[:4], "big")
    if magic != 0x800 + ndims:
        fail(f"{path}: magic number 0x{magic:08x}, expected 0x{0x800 + ndims:08x}")
    dims = [int.from_bytes(data[4 + 4 * d:8 + 4 * d], "big") for d in range(ndims)]
    header = 4 + 4 * ndims
    if len(data) != header + int(np.prod(dims)):
        fail(f"{path}: {len(data)} bytes, but its header says {header + int(np.prod(dims))}")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)


def read_split(source, split):
    prefix = SPLITS[split]
    images = read_idx(find(source, f"{prefix}-images-idx3-ubyte"), 3)
    labels = read_idx(find(source, f"{prefix}-labels-idx1-ubyte"), 1)
    if len(images) != len(labels):
        fail(f"{source}: {len(images)} {split} images but {len(labels)} labels")
    return images[:, None, :, :], labels.astype(np.int64)


def as_inputs(images, kind):
    if kind == "uint8":
        return np.ascontiguousarray(images)
    return images.astype(np.float32) / np.float32(255)


def write_npy(dest, split, inputs, targets):
    np.save(os.path.join(dest, f"{split}-inputs.npy"), inputs)
    np.save(os.path.join(dest, f"{split}-targets.npy"), targets)


def write_hdf5(dest, split, inputs, targets):
    try:
        import h5py
    except ImportError:
        fail("--format hdf5 needs h5py: sh tools/install-deps.sh installs python3-h5py")
    with h5py.File(os.path.join(dest, f"{split}.h5"), "w") as f:
        f.create_dataset("inputs", data=inputs)
        f.create_dataset("targets", data=targets)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="directory of the four IDX files")
    parser.add_argument("dest", help="directory to write (created if missing)")
    parser.add_argument("--format", choices=["npy", "hdf5", "both"], default="npy")
    parser.add_argument("--inputs", choices=["uint8", "float32"], default="uint8")
    args = parser.parse_args()
    os.makedirs(args.dest, exist_ok=True)
    for split in SPLITS:
        images, targets = read_split(args.source, split)
        inputs = as_inputs(images, args.inputs)
        if args.format in ("npy", "both"):
            write_npy(args.dest, split, inputs, targets)
        if args.format in ("hdf5", "both"):
            write_hdf5(args.dest, split, inputs, targets)
        print(f"{split}: {len(inputs)} samples {inputs.dtype} {inputs.shape[1:]} -> {args.dest} ({args.format})")


if __name__ == "__main__":
    main()
