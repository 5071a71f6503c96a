#!/usr/bin/env python3
"""The gradient reduction's overlap, read from an adjoin-train --trace timeline
(Chrome trace-event JSON, include/adjoin/trace.h).

For each rank: the reduction time is the union of its bucket spans (post to
seen complete); the exposed part is what of that union falls inside the
reducer's waits (the time after the backward that the step waited for it);
the hidden share is 1 - exposed / reduction.  Also the steps' mean length,
the count of buckets posted before the backward of the same step ended, and
the ranks present.

    trace-overlap.py TRACE.json            prints one line per rank and a total
    trace-overlap.py --json TRACE.json     the same figures as JSON

Exits 1 on a file that is not such a timeline (naming what is missing)."""
import json
import sys


def spans(events, pid, tid, name=None):
    """(begin, end) in microseconds of the spans on one track, nesting honoured."""
    out, stack = [], []
    for e in events:
        if e.get("pid") != pid or e.get("tid") != tid or e.get("ph") not in ("B", "E"):
            continue
        if e["ph"] == "B":
            stack.append((e["ts"], e.get("name")))
        elif stack:
            begin, opened = stack.pop()
            if name is None or opened == name:
                out.append((begin, e["ts"]))
    return out


def union(intervals):
    merged = []
    for b, e in sorted(intervals):
        if merged and b <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([b, e])
    return merged


def length(intervals):
    return sum(e - b for b, e in intervals)


def intersection(a, b):
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def rank_figures(events, pid):
    tids = {e.get("tid") for e in events if e.get("pid") == pid and e.get("ph") == "B"}
    buckets = [s for t in tids if t is not None and t >= 16 for s in spans(events, pid, t)]
    reduction = union(buckets)
    waits = union(spans(events, pid, 1))
    steps = spans(events, pid, 0, "step")
    backwards = spans(events, pid, 0, "backward")
    early = sum(1 for b, _ in buckets if any(bb <= b < be for bb, be in backwards))
    total, exposed = length(reduction), intersection(reduction, waits)
    return {"rank": pid, "steps": len(steps), "buckets": len(buckets), "posted_in_backward": early,
            "reduction_ms": total / 1e3, "exposed_ms": exposed / 1e3, "wait_ms": length(waits) / 1e3,
            "step_ms": length(steps) / 1e3 / max(1, len(steps)),
            "hidden": 1.0 - exposed / total if total > 0 else 0.0}


def main(argv):
    as_json = "--json" in argv
    paths = [a for a in argv[1:] if a != "--json"]
    if len(paths) != 1:
        sys.exit(__doc__)
    try:
        with open(paths[0]) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"trace-overlap: {paths[0]} is not a trace-event timeline: {error}", file=sys.stderr)
        return 1
    ranks = sorted({e["pid"] for e in events if e.get("ph") == "B" and isinstance(e.get("pid"), int)})
    if not ranks:
        print(f"trace-overlap: {paths[0]} holds no spans", file=sys.stderr)
        return 1
    figures = [rank_figures(events, pid) for pid in ranks]
    reduction = sum(f["reduction_ms"] for f in figures)
    exposed = sum(f["exposed_ms"] for f in figures)
    summary = {"ranks": figures, "hidden": 1.0 - exposed / reduction if reduction > 0 else 0.0}
    if as_json:
        print(json.dumps(summary))
        return 0
    for f in figures:
        print(f"rank {f['rank']}: {f['steps']} steps of {f['step_ms']:.2f} ms, {f['buckets']} bucket reductions "
              f"({f['posted_in_backward']} posted during the backward), reduction {f['reduction_ms']:.2f} ms, "
              f"exposed in the waits {f['exposed_ms']:.2f} ms: hidden {100 * f['hidden']:.1f}%")
    print(f"hidden by the overlap: {100 * summary['hidden']:.1f}% of the reduction time over {len(figures)} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
