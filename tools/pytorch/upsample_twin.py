#!/usr/bin/env python3
"""PyTorch reference numbers for include/adjoin/upsample_layer.h.

For each configuration of CASES (the same table, in the same order, as
tests/layers/t328-upsample-layer.c), on the input x_i = ((7 i + 3) mod 13) / 13
of the given shape, writes one line: the case index, the output count and the
outputs, then the input count and the gradient of sum(y_j w_j) with
w_j = ((5 j + 1) mod 11) / 11 - 0.5.
Run: python3 tools/pytorch/upsample_twin.py > tests/layers/data/t328-upsample-torch.txt
"""
import torch
import torch.nn.functional as F

# (input shape, mode, align_corners, size, scale_factor)
CASES = [
    ((1, 2, 4, 5), "nearest", None, (7, 8), None),
    ((1, 2, 4, 5), "nearest", None, None, (2.0, 3.0)),
    ((1, 2, 4, 5), "bilinear", False, (7, 9), None),
    ((1, 2, 4, 5), "bilinear", True, (7, 9), None),
    ((1, 2, 4, 5), "bilinear", False, None, (2.5, 1.5)),
    ((1, 2, 6, 5), "bilinear", False, (3, 2), None),
    ((2, 1, 5), "linear", False, None, (3.0,)),
    ((2, 1, 5), "linear", True, (11,), None),
    ((1, 1, 3, 4, 2), "trilinear", False, None, (2.0, 2.0, 2.0)),
    ((1, 1, 3, 4, 2), "nearest", None, (5, 6, 3), None),
]


def main():
    print("# case outputs... gradient... (PyTorch %s, float64)" % torch.__version__)
    for k, (shape, mode, ac, size, scale) in enumerate(CASES):
        n = 1
        for s in shape:
            n *= s
        x = torch.tensor([((7 * i + 3) % 13) / 13.0 for i in range(n)], dtype=torch.float64).reshape(shape)
        x.requires_grad_(True)
        y = F.interpolate(x, size=size, scale_factor=scale, mode=mode, align_corners=ac)
        w = torch.tensor([((5 * j + 1) % 11) / 11.0 - 0.5 for j in range(y.numel())], dtype=torch.float64)
        (y.reshape(-1) * w).sum().backward()
        ys = " ".join(repr(float(v)) for v in y.reshape(-1))
        gs = " ".join(repr(float(v)) for v in x.grad.reshape(-1))
        print(k, y.numel(), ys, n, gs)


if __name__ == "__main__":
    main()
