#!/usr/bin/env python3
"""PyTorch reference numbers for the losses of include/adjoin/loss_layers.h.

Writes, for each loss and reduction, the loss value (for 'none' the sum of the
elementwise losses) and the gradient of the
loss (summed with weight 1 for reduction 'none') with respect to the input, on
fixed inputs of shape (3, 4) that tests/layers/t327-losses.c rebuilds from the
same integer formulas.  Run: python3 tools/pytorch/losses_twin.py > tests/layers/data/t327-losses-torch.txt
"""
import math
import torch
import torch.nn.functional as F

N, C = 3, 4


def a(i):
    return ((i * 7 + 3) % 13) / 13.0


def b(i):
    return ((i * 5 + 1) % 11) / 11.0


def tensor(fn):
    return torch.tensor([fn(i) for i in range(N * C)], dtype=torch.float64).reshape(N, C)


# name -> (input formula, target formula, loss function(x, t, reduction))
CASES = {
    "l1": (lambda i: 4 * a(i) - 2, lambda i: 4 * b(i) - 2, lambda x, t, r: F.l1_loss(x, t, reduction=r)),
    "mse": (lambda i: 4 * a(i) - 2, lambda i: 4 * b(i) - 2, lambda x, t, r: F.mse_loss(x, t, reduction=r)),
    "bce": (lambda i: 0.05 + 0.9 * a(i), b, lambda x, t, r: F.binary_cross_entropy(x, t, reduction=r)),
    "bce_with_logits": (lambda i: 8 * a(i) - 4, b,
                        lambda x, t, r: F.binary_cross_entropy_with_logits(x, t, reduction=r)),
    "kl_div": (lambda i: -3 * a(i) - 0.1, b, lambda x, t, r: F.kl_div(x, t, reduction=r)),
    "kl_div_log": (lambda i: -3 * a(i) - 0.1, lambda i: -3 * b(i),
                   lambda x, t, r: F.kl_div(x, t, reduction=r, log_target=True)),
    "poisson_nll": (lambda i: 2 * a(i) - 1, lambda i: math.floor(5 * b(i)),
                    lambda x, t, r: F.poisson_nll_loss(x, t, reduction=r)),
    "poisson_nll_full": (lambda i: 2 * a(i) - 1, lambda i: math.floor(5 * b(i)),
                         lambda x, t, r: F.poisson_nll_loss(x, t, full=True, reduction=r)),
    "poisson_nll_linear": (lambda i: 0.1 + 3 * a(i), lambda i: math.floor(5 * b(i)),
                           lambda x, t, r: F.poisson_nll_loss(x, t, log_input=False, reduction=r)),
    "nll": (lambda i: -3 * a(i), None, None),
}


def main():
    print("# loss reduction value grad[0..11] (PyTorch %s, float64)" % torch.__version__)
    for name, (xf, tf, fn) in CASES.items():
        reductions = ["mean", "sum", "none"] + (["batchmean"] if name.startswith("kl_div") else [])
        for r in reductions:
            x = tensor(xf).requires_grad_(True)
            if name == "nll":
                labels = torch.tensor([(2 * i + 1) % C for i in range(N)])
                y = F.nll_loss(x, labels, reduction=r)
            else:
                y = fn(x, tensor(tf), r)
            y.sum().backward()
            value = float(y.sum())  # for "none": the sum of the elementwise losses
            print(name, r, repr(value), " ".join(repr(float(g)) for g in x.grad.reshape(-1)))


if __name__ == "__main__":
    main()
