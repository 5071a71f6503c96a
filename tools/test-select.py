#!/usr/bin/env python3
"""Picks tests of a configured build by suite and rank count, from meson's
introspection (the names `meson test --list` prints), for the steps of
tools/test-extra.sh that run part of the suites in another build.

    test-select.py [--targets] BUILD_DIR [--suite S]... [--ranks N,...]
                   [--also SUITE=N,...]...

Selects the tests of any suite named (every suite if none), never those of
'slow'.  An MPI test's rank count is the N of its name's -npN; --ranks keeps
those at the counts listed (all if not given), --also adds a suite's tests at
more counts (e.g. primitives=4).  Tests without -npN (scripts that start the
tools themselves) are kept.  Prints the names, one a line, for `meson test`;
with --targets, the ninja targets that those tests need (the executables they
run and depend on), for tools/build.sh's TARGETS.  Exits 1 if nothing is
selected: `meson test` given no names would run every test.
"""
import argparse
import json
import os
import re
import subprocess
import sys


def introspect(build_dir, what):
    out = subprocess.run(['meson', 'introspect', what, build_dir], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--targets', action='store_true')
    parser.add_argument('build_dir')
    parser.add_argument('--suite', action='append', default=[])
    parser.add_argument('--ranks')
    parser.add_argument('--also', action='append', default=[])
    args = parser.parse_args()

    ranks = set(args.ranks.split(',')) if args.ranks else None
    also = {}
    for spec in args.also:
        suite, counts = spec.split('=')
        also[suite] = set(counts.split(','))

    chosen = []
    for test in introspect(args.build_dir, '--tests'):
        suites = {s.split(':')[-1] for s in test['suite']}
        if 'slow' in suites or (args.suite and not suites & set(args.suite)):
            continue
        match = re.search(r'-np(\d+)$', test['name'])
        if match and ranks is not None and match.group(1) not in ranks and \
                not any(match.group(1) in counts for s, counts in also.items() if s in suites):
            continue
        chosen.append(test)
    if not chosen:
        sys.exit('test-select: no test matches')

    if not args.targets:
        print('\n'.join(test['name'] for test in chosen))
        return
    # Each target's files, relative to the build directory, by target id.
    build = os.path.realpath(args.build_dir)
    files = {t['id']: [os.path.relpath(f, build) for f in t['filename']]
             for t in introspect(args.build_dir, '--targets')}
    wanted = []
    for test in chosen:
        for dep in test['depends']:
            for f in files.get(dep, []):
                if f not in wanted:
                    wanted.append(f)
    print(' '.join(wanted))


if __name__ == '__main__':
    main()
