#!/usr/bin/env python3
"""t511: adjoin-train's --trace-events shows the gradient reduction overlapping the
backward, and its counters match the parameter bytes.

Data-parallel LeNet-5 on 256 of the provisioned digits, global batch 64 (4
steps), with --trace-events (rank 0's events, docs/data-parallel.md) and a
checkpoint (for the parameter shapes).  In every step of an overlapped run:
  - the first gradient bucket is posted before the backward of the network's
    first stage (stage 0, the last one the backward reaches) begins, and every
    bucket is posted once, in index order, during the last micro-batch's
    backward;
  - exactly one wait, after the last stage's backward and before the
    optimizer step, with no bucket posted after it begins, and every bucket
    completed by its end;
and per step the reducer counts the parameter bytes as payload, one message
per bucket, and the parameter bytes times 2 (q - 1) / q as the all-reduce's
per-rank volume for q replicas (docs/parallelism.md section 0).  Runs: dp2
float32 with 2 micro-batches and several buckets, dp4 float64 with one bucket
per parameter; and dp2 with --reduce-after-backward, whose buckets must all be
posted inside the wait (so the overlap check can tell the two apart).
Skipped (77) when data/mnist has not been provisioned.

Usage: t511-dp-trace.py MPIEXEC ADJOIN_TRAIN DATA_DIR"""
import re
import shutil
import sys
import tempfile

from train_cli import arguments, Checks, read_checkpoint, run

mpiexec, train, data = arguments("t511")
work = tempfile.mkdtemp(prefix="adjoin-t511-")
checks = Checks("t511")
STEPS = 4


def read_steps(path):
    """The trace as a list of steps, each a list of (seconds, event, arg)."""
    steps, current = [], []
    with open(path) as f:
        for line in f:
            seconds, event, arg = line.split()
            current.append((float(seconds), event, int(arg)))
            if event == "step":
                steps.append(current)
                current = []
    return steps


def where(events, name, arg=None):
    return [i for i, (_, e, a) in enumerate(events) if e == name and (arg is None or a == arg)]


def check_step(label, events, buckets, micro, overlapped):
    """Checks one step's events; returns (first post, stage 0 backward begin) event indices."""
    forwards, posts = where(events, "forward"), where(events, "bucket_posted")
    waits, wait_ends = where(events, "wait_begin"), where(events, "wait_end")
    stage0 = where(events, "backward_begin", 0)
    checks.check(len(forwards) == micro, f"{label}: {len(forwards)} forwards, expected {micro}")
    checks.check([events[i][2] for i in posts] == list(range(buckets)),
                 f"{label}: buckets posted {[events[i][2] for i in posts]}, expected 0..{buckets - 1} once each")
    if not (posts and stage0 and len(waits) == 1 and len(wait_ends) == 1):
        checks.check(False, f"{label}: {len(posts)} posts, {len(stage0)} stage-0 backwards, {len(waits)} waits")
        return None
    wait, last_backward = waits[0], where(events, "backward_end")[-1]
    checks.check(posts[0] > forwards[-1], f"{label}: a bucket posted before the last micro-batch's forward")
    checks.check(last_backward < wait < wait_ends[0] < len(events) - 1,
                 f"{label}: the wait (events {wait}..{wait_ends[0]}) is not between the last backward "
                 f"({last_backward}) and the step ({len(events) - 1})")
    completed = [events[i][2] for i in where(events, "bucket_completed") if i < wait_ends[0]]
    checks.check(sorted(completed) == list(range(buckets)), f"{label}: buckets completed {completed}")
    if overlapped:
        checks.check(posts[0] < stage0[-1], f"{label}: first bucket posted at event {posts[0]}, after the backward "
                     f"of stage 0 begins (event {stage0[-1]})")
        checks.check(posts[-1] < wait, f"{label}: bucket posted at event {posts[-1]}, inside the wait ({wait})")
    else:
        checks.check(posts[0] > wait, f"{label}: reduce-after-backward posted a bucket at event {posts[0]}, "
                     f"before the wait ({wait})")
    return posts[0], stage0[-1]


def check_run(label, ranks, dtype, micro, caps, overlapped=True):
    trace, ckpt = f"{work}/{label}.trace", f"{work}/{label}.ckpt"
    args = [train, "--data", data, "--train-limit", "256", "--test-limit", "64", "--batch", "64", "--epochs", "1",
            "--layout", "dp", "--dtype", dtype, "--micro-batches", str(micro), "--trace-events", trace,
            "--checkpoint", ckpt, *caps] + ([] if overlapped else ["--reduce-after-backward"])
    code, out = run(mpiexec, ranks, args)
    if not checks.check(code == 0, f"{label}: exit {code}:\n{out[-800:]}"):
        return
    header = re.search(r"(\d+) gradient buckets?", out)
    counted = re.search(r"gradient reducer per step: (\d+) bytes in ([\d.]+) messages \(all-reduce volume (\d+) "
                        r"bytes per rank\)", out)
    if not checks.check(header and counted, f"{label}: no bucket count or reducer line in:\n{out[-800:]}"):
        return
    buckets = int(header.group(1))
    payload, messages, volume = int(counted.group(1)), float(counted.group(2)), int(counted.group(3))
    parameter_bytes = sum(p["volume"] for p in read_checkpoint(ckpt)["parameters"]) * (4 if dtype == "f32" else 8)
    factor = 2 * (ranks - 1) / ranks
    print(f"t511: {label}: {buckets} buckets; per step {payload} payload bytes (parameters: {parameter_bytes}), "
          f"{messages:g} messages, all-reduce volume {volume} bytes = {volume / parameter_bytes:.4f} x the parameter "
          f"bytes (2 (q-1)/q = {factor:.4f} for q = {ranks})")
    checks.check(payload == parameter_bytes, f"{label}: {payload} payload bytes per step, parameters {parameter_bytes}")
    checks.check(messages == buckets, f"{label}: {messages} messages per step for {buckets} buckets")
    checks.check(abs(volume - factor * parameter_bytes) <= 0.5,
                 f"{label}: all-reduce volume {volume} per step, expected {factor * parameter_bytes:.1f}")
    steps = read_steps(trace)
    checks.check(len(steps) == STEPS, f"{label}: {len(steps)} steps in the trace, expected {STEPS}")
    for s, events in enumerate(steps):
        found = check_step(f"{label} step {s + 1}", events, buckets, micro, overlapped)
        if found and s == 0:
            post, stage0 = found
            print(f"t511: {label} step 1: first bucket posted at event {post} ({1e3 * events[post][0]:.3f} ms), "
                  f"backward of stage 0 begins at event {stage0} ({1e3 * events[stage0][0]:.3f} ms); "
                  f"{len(where(events, 'wait_begin'))} wait, before the step at event {len(events) - 1}")


check_run("dp2-f32-micro2", 2, "f32", 2, ["--bucket-cap", "64K", "--first-bucket-cap", "4K"])
check_run("dp4-f64-per-parameter", 4, "f64", 1, ["--bucket-cap", "0"])
check_run("dp2-f32-after-backward", 2, "f32", 1, ["--bucket-cap", "64K", "--first-bucket-cap", "4K"], overlapped=False)
shutil.rmtree(work)
sys.exit(checks.finish())
