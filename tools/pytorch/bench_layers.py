#!/usr/bin/python3
"""PyTorch twin of bench-layers (bench/bench_layers.c): times PyTorch's op for one layer case per line.

bench-layers starts this script as a child process (--twin) and writes one case per line on its stdin, as
`bench-layers --list` prints them:

    kind=conv dtype=f32 threads=2 calls=40 rounds=3 clock=wall shape=128,16,14,14 out=32 kernel=3 stride=1
        padding=1 mode=- scale=0 bias=0 first=0

The script builds the same op at the same shape (nn.Conv2d, nn.MaxPool2d, nn.Linear, nn.BatchNorm2d in
training mode, nn.Upsample, F.pad, the losses with reduction 'mean', nn.CrossEntropyLoss), times it the
way adjoin's adj_layer_time does (one forward + backward to warm up, then `rounds` rounds of `calls`
forwards and `rounds` rounds of `calls` forward + backward pairs, the output gradient fixed, the input
requiring a gradient unless first=1; clock=cpu times the process's CPU time) and answers one line: the median round's seconds per forward and per
forward + backward, then the fastest round's of each.  It first prints one line naming PyTorch and its
thread count.  Needs Debian's python3-torch (PyTorch 1.13), run with /usr/bin/python3.

    /usr/bin/python3 tools/pytorch/bench_layers.py < specs
"""
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def parse(line):
    spec = dict(word.split("=", 1) for word in line.split())
    spec["shape"] = [int(v) for v in spec["shape"].split(",")]
    for key in ("threads", "calls", "rounds", "out", "kernel", "stride", "padding", "bias", "first"):
        spec[key] = int(spec[key])
    spec["scale"] = float(spec["scale"])
    return spec


def conv_class(dims):
    return {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dims]


def loss_op(mode, shape, dtype):
    """The loss module and a target in its domain (the same values adjoin's case sets)."""
    n, f = shape
    if mode == "nll":
        return nn.NLLLoss(), (torch.arange(n) * 7) % f
    target = ((torch.arange(n * f) * 37) % 100).to(dtype).reshape(n, f) / 100
    losses = {"l1": nn.L1Loss(), "mse": nn.MSELoss(), "bce": nn.BCELoss(), "bce_logits": nn.BCEWithLogitsLoss(),
              "kl": nn.KLDivLoss(reduction="mean"), "poisson": nn.PoissonNLLLoss()}
    return losses[mode], target


def module(spec, dtype):
    """The op as a callable of x, and the input to give it."""
    shape, dims, kind = spec["shape"], len(spec["shape"]) - 2, spec["kind"]
    x = torch.rand(shape, dtype=dtype) * 2 - 1
    if kind == "conv":
        m = conv_class(dims)(shape[1], spec["out"], spec["kernel"], spec["stride"], spec["padding"],
                             bias=bool(spec["bias"]))
    elif kind == "maxpool":
        m = {1: nn.MaxPool1d, 2: nn.MaxPool2d, 3: nn.MaxPool3d}[dims](spec["kernel"], spec["stride"])
    elif kind == "avgpool":
        m = {1: nn.AvgPool1d, 2: nn.AvgPool2d, 3: nn.AvgPool3d}[dims](spec["kernel"], spec["stride"])
    elif kind in ("affine", "phantom"):
        m = nn.Linear(shape[1], spec["out"], bias=bool(spec["bias"]))
    elif kind == "activation":
        m = {"relu": nn.ReLU(), "leaky_relu": nn.LeakyReLU(0.01), "tanh": nn.Tanh(), "sigmoid": nn.Sigmoid()}[spec["mode"]]
    elif kind == "batchnorm":
        m = {0: nn.BatchNorm1d, 1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}[dims](shape[1])
    elif kind == "upsample":
        mode = "nearest" if spec["mode"] == "nearest" else {1: "linear", 2: "bilinear", 3: "trilinear"}[dims]
        m = nn.Upsample(scale_factor=spec["scale"], mode=mode, align_corners=None if mode == "nearest" else False)
    elif kind == "pad":
        pads, mode = (spec["padding"],) * (2 * dims), {"zeros": "constant"}.get(spec["mode"], spec["mode"])
        m = lambda v: F.pad(v, pads, mode=mode)  # noqa: E731
    elif kind in ("loss", "xent"):
        loss, target = loss_op(spec["mode"], shape, dtype) if kind == "loss" else \
            (nn.CrossEntropyLoss(), (torch.arange(shape[0]) * 7) % shape[1])
        if spec["mode"] == "bce":
            x = ((torch.arange(x.numel()) * 53) % 97).to(dtype).reshape(shape) / 97
        m = lambda v: loss(v, target)  # noqa: E731
    else:
        raise ValueError(f"unknown kind {kind}")
    if isinstance(m, nn.Module):
        m = m.to(dtype).train()
    return m, x


def rounds(step, calls, count, clock):
    """The median and fastest of `count` rounds of `calls` steps, in seconds per step."""
    seconds = []
    for _ in range(count):
        start = clock()
        for _ in range(calls):
            step()
        seconds.append((clock() - start) / calls)
    seconds.sort()
    middle = len(seconds) // 2
    median = seconds[middle] if len(seconds) % 2 else 0.5 * (seconds[middle - 1] + seconds[middle])
    return median, seconds[0]


def time_case(spec):
    dtype = torch.float32 if spec["dtype"] == "f32" else torch.float64
    torch.set_num_threads(spec["threads"])
    torch.manual_seed(1)
    m, x = module(spec, dtype)
    x.requires_grad_(not spec["first"])
    dy = torch.rand(m(x).shape, dtype=dtype) * 2 - 1

    def forward():
        m(x)

    def forward_backward():
        m(x).backward(dy)

    forward_backward()
    clock = time.process_time if spec.get("clock") == "cpu" else time.perf_counter
    f, f_best = rounds(forward, spec["calls"], spec["rounds"], clock)
    fb, fb_best = rounds(forward_backward, spec["calls"], spec["rounds"], clock)
    return f, fb, f_best, fb_best


def main():
    print(f"twin PyTorch {torch.__version__}", flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            print("%.9g %.9g %.9g %.9g" % time_case(parse(line)), flush=True)
        except Exception as e:  # the error goes to bench-layers, which names the case
            print(f"error {type(e).__name__}: {e}", flush=True)
            print(f"bench_layers.py: {line.strip()}: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
