#!/usr/bin/env python3
"""PyTorch reference numbers for include/adjoin/batchnorm_layer.h.

For each case of CASES (the same table, in the same order, as
tests/layers/t326-batchnorm-layer.c), on the input
x_i = offset + ((7 i + 3) mod 13) / 13 of the given shape, with
gamma_c = 0.5 + c / 4, beta_c = c / 8 - 0.25, eps 1e-5, momentum 0.3, one
training forward, then writes one line: the case index; the output count and
outputs; the input count and the gradient of sum(y_j w_j) with
w_j = ((5 j + 1) mod 11) / 11 - 0.5 with respect to x; the gradients of gamma
and beta; the running mean and (unbiased) running variance; then, in
evaluation mode on the same input, the outputs again.
Run: python3 tools/pytorch/batchnorm_twin.py > tests/layers/data/t326-batchnorm-torch.txt
"""
import torch

# (input shape, offset)
CASES = [
    ((4, 3), 0.0),
    ((3, 2, 5), 0.0),
    ((2, 3, 4, 3), 0.0),
    ((2, 3, 4, 3), 1000.0),
    ((2, 2, 3, 2, 3), 0.0),
]


def fmt(t):
    return " ".join(repr(float(v)) for v in t.reshape(-1))


def main():
    torch.set_default_dtype(torch.float64)
    print("# case y... dx... dgamma dbeta running_mean running_var y_eval... (PyTorch %s, float64)"
          % torch.__version__)
    for k, (shape, offset) in enumerate(CASES):
        n = 1
        for s in shape:
            n *= s
        c = shape[1]
        bn = {2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm1d, 4: torch.nn.BatchNorm2d,
              5: torch.nn.BatchNorm3d}[len(shape)](c, eps=1e-5, momentum=0.3)
        with torch.no_grad():
            bn.weight.copy_(torch.tensor([0.5 + j / 4 for j in range(c)]))
            bn.bias.copy_(torch.tensor([j / 8 - 0.25 for j in range(c)]))
        x = torch.tensor([offset + ((7 * i + 3) % 13) / 13.0 for i in range(n)]).reshape(shape)
        x.requires_grad_(True)
        bn.train()
        y = bn(x)
        w = torch.tensor([((5 * j + 1) % 11) / 11.0 - 0.5 for j in range(y.numel())])
        (y.reshape(-1) * w).sum().backward()
        bn.eval()
        with torch.no_grad():
            y_eval = bn(x)
        print(k, y.numel(), fmt(y.detach()), n, fmt(x.grad), fmt(bn.weight.grad), fmt(bn.bias.grad),
              fmt(bn.running_mean), fmt(bn.running_var), fmt(y_eval))


if __name__ == "__main__":
    main()
