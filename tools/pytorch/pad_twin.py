#!/usr/bin/env python3
"""PyTorch reference numbers for include/adjoin/pad_layer.h (F.pad's modes)
and for average pooling with and without count_include_pad (F.avg_pool1d/2d/3d).

For each configuration of PAD_CASES and POOL_CASES (the same tables, in the same
order, as tests/layers/t340-pad-layer.c and t341-avg-pool-pad.c), on the input
x_i = ((7 i + 3) mod 13) / 13 of the given shape, writes one line: the case
index, the output count and the outputs, then the input count and the gradient
of sum(y_j w_j) with w_j = ((5 j + 1) mod 11) / 11 - 0.5.  Pad lines come
first, under "# pad", then pool lines under "# pool".
Run: python3 tools/pytorch/pad_twin.py pad > tests/layers/data/t340-pad-torch.txt
     python3 tools/pytorch/pad_twin.py pool > tests/layers/data/t341-avg-pool-torch.txt
"""
import sys

import torch
import torch.nn.functional as F

# (input shape, mode, padding per spatial dimension as (left, right), first dimension first)
PAD_CASES = [
    ((2, 1, 5), "reflect", ((2, 3),)),
    ((2, 1, 5), "replicate", ((4, 1),)),
    ((2, 1, 5), "circular", ((5, 2),)),
    ((2, 1, 5), "constant", ((1, 2),)),
    ((1, 2, 4, 5), "reflect", ((3, 1), (2, 4))),
    ((1, 2, 4, 5), "replicate", ((2, 2), (0, 3))),
    ((1, 2, 4, 5), "circular", ((4, 1), (3, 5))),
    ((1, 2, 4, 5), "constant", ((1, 0), (2, 1))),
    ((1, 1, 3, 4, 2), "reflect", ((2, 1), (1, 3), (1, 1))),
    ((1, 1, 3, 4, 2), "replicate", ((1, 2), (2, 0), (3, 1))),
    ((1, 1, 3, 4, 2), "circular", ((3, 2), (1, 4), (2, 2))),
]

# (input shape, kernel, stride, padding (symmetric, as PyTorch takes it), count_include_pad)
POOL_CASES = [
    ((2, 1, 9), (3,), (2,), (1,), False),
    ((2, 1, 9), (3,), (2,), (1,), True),
    ((1, 2, 7, 6), (3, 2), (2, 1), (1, 1), False),
    ((1, 2, 7, 6), (3, 2), (2, 1), (1, 1), True),
    ((1, 2, 7, 6), (4, 4), (3, 2), (2, 2), False),
    ((1, 1, 5, 4, 6), (3, 3, 3), (2, 1, 2), (1, 1, 1), False),
    ((1, 1, 5, 4, 6), (2, 3, 2), (1, 2, 2), (1, 1, 0), True),
]


def torch_pad(x, mode, padding):
    # F.pad lists the last dimension first.
    flat = []
    for left, right in reversed(padding):
        flat += [left, right]
    return F.pad(x, flat, mode=mode)


def torch_pool(x, kernel, stride, padding, include):
    pool = [F.avg_pool1d, F.avg_pool2d, F.avg_pool3d][len(kernel) - 1]
    return pool(x, kernel, stride, padding, count_include_pad=include)


def line(k, shape, run):
    n = 1
    for s in shape:
        n *= s
    x = torch.tensor([((7 * i + 3) % 13) / 13.0 for i in range(n)], dtype=torch.float64).reshape(shape)
    x.requires_grad_(True)
    y = run(x)
    w = torch.tensor([((5 * j + 1) % 11) / 11.0 - 0.5 for j in range(y.numel())], dtype=torch.float64)
    (y.reshape(-1) * w).sum().backward()
    ys = " ".join(repr(float(v)) for v in y.reshape(-1))
    gs = " ".join(repr(float(v)) for v in x.grad.reshape(-1))
    print(k, y.numel(), ys, n, gs)


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "pad"
    print("# %s: case outputs... gradient... (PyTorch %s, float64)" % (which, torch.__version__))
    if which == "pad":
        for k, (shape, mode, padding) in enumerate(PAD_CASES):
            line(k, shape, lambda x: torch_pad(x, mode, padding))
    else:
        for k, (shape, kernel, stride, padding, include) in enumerate(POOL_CASES):
            line(k, shape, lambda x: torch_pool(x, kernel, stride, padding, include))


if __name__ == "__main__":
    main()
