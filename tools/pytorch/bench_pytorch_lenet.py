#!/usr/bin/python3
"""PyTorch twin of adjoin's LeNet-5, for side-by-side speed and accuracy.

The same architecture as networks/lenet5.net (conv 1->6 5x5 pad 2, ReLU,
max-pool 2, conv 6->16 5x5, ReLU, max-pool 2, affine 400->120->84->10 with
ReLU, logits into cross-entropy), the same batch size, Adam, and PyTorch's
default initialisation, trained on the same IDX files.

    /usr/bin/python3 tools/pytorch/bench_pytorch_lenet.py [--data data/mnist] [--epochs 1]
        [--batch 256] [--lr 0.001] [--seed 1] [--threads N] [--dtype f32|f64]

Prints one line per epoch (loss, train and test accuracy, seconds,
images/s of the training pass), then `test_accuracy=0.XXXX` and
`images_per_s=NNNN` (the best epoch's training throughput).  Needs Debian's
python3-torch (PyTorch 1.13): apt-get install -y python3-torch; run it with
Debian's /usr/bin/python3 (a pyenv or venv python does not see that package).
"""
import argparse
import gzip
import os
import struct
import sys
import time

import torch
import torch.nn as nn


def read_idx(path):
    """An unsigned-byte IDX file (raw or gzip) as a uint8 tensor."""
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        data = f.read()
    ndims = data[3]
    dims = struct.unpack(">" + "I" * ndims, data[4:4 + 4 * ndims])
    return torch.frombuffer(bytearray(data[4 + 4 * ndims:]), dtype=torch.uint8).reshape(dims)


def find(directory, name):
    for candidate in (name, name + ".gz"):
        path = os.path.join(directory, candidate)
        if os.path.exists(path):
            return path
    sys.exit(f"bench_pytorch_lenet: {name}[.gz] not found in {directory}")


def load(directory, split, dtype):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(find(directory, f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(find(directory, f"{prefix}-labels-idx1-ubyte"))
    return images.to(dtype).unsqueeze(1) / 255.0, labels.long()


def lenet():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10))


def evaluate(model, x, y, batch):
    model.eval()
    correct = 0
    with torch.no_grad():
        for first in range(0, len(x), batch):
            correct += (model(x[first:first + batch]).argmax(1) == y[first:first + batch]).sum().item()
    model.train()
    return correct / len(x)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="data/mnist")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--dtype", choices=["f32", "f64"], default="f32")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    dtype = torch.float32 if a.dtype == "f32" else torch.float64
    x_train, y_train = load(a.data, "train", dtype)
    x_test, y_test = load(a.data, "test", dtype)
    model = lenet().to(dtype)
    optimizer = torch.optim.Adam(model.parameters(), lr=a.lr)
    loss_fn = nn.CrossEntropyLoss()
    print(f"pytorch {torch.__version__}, {a.threads} threads, {a.dtype}, batch {a.batch}, "
          f"{len(x_train)} training / {len(x_test)} test images")
    best = 0.0
    for epoch in range(1, a.epochs + 1):
        order = torch.randperm(len(x_train))
        total, correct, start = 0.0, 0, time.perf_counter()
        for first in range(0, len(x_train), a.batch):
            index = order[first:first + a.batch]
            optimizer.zero_grad()
            logits = model(x_train[index])
            loss = loss_fn(logits, y_train[index])
            loss.backward()
            optimizer.step()
            total += loss.item() * len(index)
            correct += (logits.argmax(1) == y_train[index]).sum().item()
        seconds = time.perf_counter() - start
        rate = len(x_train) / seconds
        best = max(best, rate)
        test = evaluate(model, x_test, y_test, a.batch)
        print(f"epoch {epoch:3d}/{a.epochs}  loss {total / len(x_train):.4f}  "
              f"train_acc {correct / len(x_train):.4f}  test_acc {test:.4f}  "
              f"time {seconds:.2f} s  {rate:.0f} images/s", flush=True)
    print(f"test_accuracy={test:.4f}")
    print(f"images_per_s={best:.0f}")


if __name__ == "__main__":
    main()
