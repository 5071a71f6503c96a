#!/usr/bin/env python3
"""Rows of tools/bench-cluster.sh's table for one link rate and progress mode:
the link the calibration recovered, the training throughputs and overlap, and
the ceiling raw MPI sets on the link.

    bench-cluster-table.py [--link] RATE MODE CALIBRATION ALONE OVERLAP AFTER HIDDEN BYTES WAIT_AFTER_MS

--link adds the rows of the link and of the ceiling (once per rate)."""
import sys


def main(argv):
    link = len(argv) > 1 and argv[1] == "--link"
    if link:
        argv = argv[:1] + argv[2:]
    if len(argv) != 10:
        sys.exit(__doc__)
    rate, mode, path = argv[1:4]
    alone, overlap, after, hidden, nbytes, wait_after = (float(x or 0) for x in argv[4:])
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1.0}
    unit = next(u for u in units if rate.endswith(u))
    bits = float(rate[: -len(unit)]) * units[unit]
    with open(path) as f:
        cal = dict(line.split()[:2] for line in f if line.strip() and not line.startswith("#"))
    alpha, beta = float(cal["alpha"]), float(cal["beta"])
    measured = 8.0 / beta
    raw = float(cal["allreduce_alpha"]) + float(cal["allreduce_beta"]) * nbytes
    ratio = lambda a, b: f"{a / b:.3f}" if b > 0 else "-"
    if link:
        print(f"| {rate} | link | ping-pong alpha {alpha * 1e6:.1f} us, {measured / 1e9:.3f} Gbit/s = "
              f"{measured / bits:.3f} x the rate set |")
        print(f"| {rate} | ceiling | raw MPI all-reduce of {nbytes / 1e6:.3f} MB by the calibrated fit "
              f"{raw * 1e3:.3f} ms; the after-backward step waited {wait_after:.3f} ms: {ratio(raw * 1e3, wait_after)} "
              f"of it |")
    print(f"| {rate} | train, progress {mode} | alone {alone:.0f} img/s, dp2 overlap {overlap:.0f}, dp2 after "
          f"{after:.0f}; hidden {hidden:.1f}%; overlap / after {ratio(overlap, after)}; dp2 / alone "
          f"{ratio(overlap, alone)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
