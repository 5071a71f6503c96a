#!/usr/bin/python3
"""PyTorch twin of adjoin's encoder-decoder classifier (networks/encdec.net).

The same network: conv 3x3 1->16 (no bias), BatchNorm2d, ReLU, max-pool 2;
conv 3x3 16->32 (no bias), BatchNorm2d, ReLU, max-pool 2; nearest upsample x2,
conv 3x3 32->16 (no bias), BatchNorm2d, ReLU; max-pool 2; flatten, linear
784->10, cross-entropy.  PyTorch's default initialisation (adjoin's
adj_network_init_uniform draws from the same distributions: uniform
+-1/sqrt(fan_in), batch norm weight 1 and bias 0), BatchNorm2d's defaults
(eps 1e-5, momentum 0.1), Adam, the same batch size.  Like adjoin-train, the
short last batch of an epoch is padded with zero images that enter the
batch statistics but not the loss, and the test set is evaluated in eval
mode (running statistics).

    /usr/bin/python3 tools/pytorch/encdec_pytorch.py [--data data/fashion-mnist] [--epochs 2]
        [--batch 256] [--lr 0.001] [--seed 1] [--threads N]
        [--train-limit N] [--test-limit N] [--evaluate-checkpoint PATH]

Prints one line per epoch, then `test_accuracy=0.XXXX`.  With
--evaluate-checkpoint it trains nothing: it loads the parameters and running
statistics of an adjoin-train --model encdec checkpoint (docs/checkpoint.md,
version 3) and prints the test accuracy of that network in PyTorch, to
compare with what adjoin-train prints for the same checkpoint.  Needs Debian's
python3-torch (PyTorch 1.13), run with Debian's /usr/bin/python3.
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_pytorch_lenet import evaluate, load  # noqa: E402  (the IDX reader and evaluation are shared)


def encdec():
    def block(c_in, c_out):
        return [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]
    return nn.Sequential(
        *block(1, 16), nn.MaxPool2d(2, 2),
        *block(16, 32), nn.MaxPool2d(2, 2),
        nn.Upsample(scale_factor=2, mode="nearest"),
        *block(32, 16), nn.MaxPool2d(2, 2),
        nn.Flatten(),
        nn.Linear(784, 10))


def load_checkpoint(model, path):
    """adjoin's parameters (in order) and running statistics into `model`."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "net"))
    from train_cli import read_checkpoint  # the reader the tests use
    ck = read_checkpoint(path)
    parameters = list(model.parameters())
    assert len(parameters) == len(ck["parameters"]), "the checkpoint is not an encdec network's"
    with torch.no_grad():
        for mine, stored in zip(parameters, ck["parameters"]):
            assert tuple(mine.shape) == tuple(stored["shape"]), f"{stored['name']} {stored['shape']}"
            mine.copy_(torch.tensor(stored["values"][:stored["volume"]], dtype=mine.dtype).reshape(mine.shape))
        norms = [m for m in model if isinstance(m, nn.BatchNorm2d)]
        for k, norm in enumerate(norms):
            norm.running_mean.copy_(torch.tensor(ck["state"][2 * k][1], dtype=norm.running_mean.dtype))
            norm.running_var.copy_(torch.tensor(ck["state"][2 * k + 1][1], dtype=norm.running_var.dtype))


def padded_step(model, optimizer, loss_fn, x, y, batch):
    """One Adam step on a batch padded with zero images to `batch` samples."""
    n = len(x)
    if n < batch:
        x = torch.cat([x, x.new_zeros((batch - n,) + tuple(x.shape[1:]))])
    optimizer.zero_grad()
    logits = model(x)[:n]
    loss = loss_fn(logits, y)
    loss.backward()
    optimizer.step()
    return loss.item() * n, (logits.argmax(1) == y).sum().item()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="data/fashion-mnist")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--lr-schedule", choices=["constant", "cosine"], default="constant")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--train-limit", type=int, default=0)
    p.add_argument("--test-limit", type=int, default=0)
    p.add_argument("--evaluate-checkpoint", default=None)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    # A checkpoint is evaluated in float64, so no prediction turns on rounding.
    dtype = torch.float64 if a.evaluate_checkpoint else torch.float32
    x_train, y_train = load(a.data, "train", dtype)
    x_test, y_test = load(a.data, "test", dtype)
    if a.train_limit:
        x_train, y_train = x_train[:a.train_limit], y_train[:a.train_limit]
    if a.test_limit:
        x_test, y_test = x_test[:a.test_limit], y_test[:a.test_limit]
    model = encdec().to(dtype)
    if a.evaluate_checkpoint:
        load_checkpoint(model, a.evaluate_checkpoint)
        print(f"test_accuracy={evaluate(model, x_test, y_test, a.batch):.4f}")
        return
    optimizer = torch.optim.Adam(model.parameters(), lr=a.lr)
    # adjoin's ADJ_LR_COSINE: step k (0-based) at lr (1 + cos(pi k / T)) / 2, 0 past T.
    steps = (len(x_train) + a.batch - 1) // a.batch * a.epochs
    scale = (lambda k: 0.5 * (1 + math.cos(math.pi * min(k, steps) / steps))) if a.lr_schedule == "cosine" \
        else (lambda k: 1.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, scale)
    loss_fn = nn.CrossEntropyLoss()
    print(f"pytorch {torch.__version__}, {a.threads} threads, batch {a.batch}, "
          f"{len(x_train)} training / {len(x_test)} test images")
    test = 0.0
    for epoch in range(1, a.epochs + 1):
        model.train()
        order = torch.randperm(len(x_train))
        total, correct, start = 0.0, 0, time.perf_counter()
        for first in range(0, len(x_train), a.batch):
            index = order[first:first + a.batch]
            loss, right = padded_step(model, optimizer, loss_fn, x_train[index], y_train[index], a.batch)
            schedule.step()
            total += loss
            correct += right
        seconds = time.perf_counter() - start
        test = evaluate(model, x_test, y_test, a.batch)
        print(f"epoch {epoch:3d}/{a.epochs}  loss {total / len(x_train):.4f}  "
              f"train_acc {correct / len(x_train):.4f}  test_acc {test:.4f}  time {seconds:.2f} s", flush=True)
    print(f"test_accuracy={test:.4f}")


if __name__ == "__main__":
    main()
