#!/usr/bin/env python3
"""The closing count of a test script: one line per meson test log named
(its build, passed, failed, skipped, minutes the tests took), then one line of
totals over all of them that a person and CI can read.

    python3 tools/test-totals.py LABEL=build/meson-logs/testlog.json ...

A log is meson's testlog*.json (one JSON object per test) or a file of the
same form that a script writes itself (tools/emulate-x86-64-v4.sh).  A log
that is missing counts as one failure: the step that should have written it
did not get that far."""
import json
import sys


def count(path):
    """(passed, failed, skipped, seconds, failures) of one log; failures lists
    a line for each test that did not pass: result, name, time, last words."""
    passed = failed = skipped = 0
    seconds = 0.0
    failures = []
    with open(path) as log:
        for line in log:
            if not line.strip():
                continue
            test = json.loads(line)
            result = test["result"]
            seconds += test.get("duration", 0.0)
            if result == "OK":
                passed += 1
            elif result == "SKIP":
                skipped += 1
            else:
                failed += 1
                output = (test.get("stdout") or "").strip().splitlines()
                last = output[-1][:160] if output else ""
                failures.append(f"    {result} {test['name']} ({test.get('duration', 0.0):.0f} s): {last}")
    return passed, failed, skipped, seconds, failures


def main(arguments):
    totals = [0, 0, 0]
    for argument in arguments:
        label, _, path = argument.rpartition("=")
        try:
            passed, failed, skipped, seconds, failures = count(path)
        except OSError as error:
            print(f"  {label or path}: no test log ({error.strerror}): counted as 1 failed")
            totals[1] += 1
            continue
        print(f"  {label or path}: {passed} passed, {failed} failed, {skipped} skipped "
              f"({seconds / 60:.1f} min of tests)")
        for line in failures:
            print(line)
        totals = [totals[0] + passed, totals[1] + failed, totals[2] + skipped]
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 1 if totals[1] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
