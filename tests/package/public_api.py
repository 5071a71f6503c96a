#!/usr/bin/env python3
"""Checks of adjoin's public API as a package (tests t01x).

  public_api.py list INCLUDE_DIR
      prints the public headers (include/adjoin/*.h), one per line; meson
      registers one header test per line.
  public_api.py header INCLUDE_DIR HEADER LIB CC... -- CXX... [-- EXTRA_FLAGS...]
      compiles HEADER alone (twice, for its include guard) as C11, then as
      C++ a program that takes the address of every function the header
      declares and links it against LIB: a missing extern "C", a function
      declared but not exported, or a header that needs another one first
      fails here.  Every header must also be included by adjoin/adjoin.h.
  public_api.py exports INCLUDE_DIR LIB
      `nm -D` of LIB must list exactly the functions the public headers
      declare: nothing without the adj_ prefix, no private helper, and no
      public declaration left hidden.

A declaration counts as public when a line of a public header starts at
column 0 with a return type and names adj_<name>( (typedefs, macros and
static inline functions excluded)."""
import glob
import os
import re
import subprocess
import sys
import tempfile

DECL = re.compile(r"^(?!typedef|static|#|extern \"C\")[A-Za-z_][^;{}()]*?\b(adj_\w+)\s*\(")
WARN_C = ["-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror"]
WARN_CXX = ["-std=c++17", "-Wall", "-Wextra", "-Werror"]


def headers(include_dir):
    return sorted(glob.glob(os.path.join(include_dir, "adjoin", "*.h")))


def declared(path):
    names = []
    for line in open(path, encoding="utf-8"):
        m = DECL.match(line)
        if m:
            names.append(m.group(1))
    return names


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return r.returncode, r.stdout


def split_args(args):
    parts, cur = [], []
    for a in args:
        if a == "--":
            parts.append(cur)
            cur = []
        else:
            cur.append(a)
    parts.append(cur)
    return parts


def check_header(include_dir, header, lib, cc, cxx, extra):
    path = os.path.join(include_dir, "adjoin", header)
    if not os.path.exists(path):
        print(f"{header}: no such public header in {include_dir}/adjoin")
        return 1
    umbrella = open(os.path.join(include_dir, "adjoin", "adjoin.h"), encoding="utf-8").read()
    if header != "adjoin.h" and f'#include "adjoin/{header}"' not in umbrella:
        print(f'{header}: adjoin/adjoin.h does not include it; add #include "adjoin/{header}" there')
        return 1
    names = declared(path)
    incs = ["-I" + include_dir] + extra
    with tempfile.TemporaryDirectory() as tmp:
        c_src = os.path.join(tmp, "alone.c")
        with open(c_src, "w") as f:
            f.write(f'#include "adjoin/{header}"\n#include "adjoin/{header}"\nint main(void) {{ return 0; }}\n')
        code, out = run(cc + WARN_C + incs + ["-fsyntax-only", c_src])
        if code:
            print(f"{header}: does not compile alone as C11:\n{out}")
            return 1
        cxx_src = os.path.join(tmp, "alone.cpp")
        with open(cxx_src, "w") as f:
            f.write(f'#include "adjoin/{header}"\n#include "adjoin/{header}"\n')
            f.write("int main() {\n  const void *volatile p = nullptr;\n")
            for n in names:
                f.write(f"  p = reinterpret_cast<const void *>(&{n});\n")
            f.write("  return p == nullptr;\n}\n")
        exe = os.path.join(tmp, "alone")
        libdir = os.path.dirname(os.path.abspath(lib))
        code, out = run(cxx + WARN_CXX + incs + [cxx_src, "-o", exe, os.path.abspath(lib),
                                                 "-Wl,-rpath," + libdir] + [x for x in extra if x.startswith("-l") or x.startswith("-L")])
        if code:
            print(f"{header}: C++ program taking the address of its {len(names)} functions does not build "
                  f"(missing extern \"C\" / ADJ_BEGIN_DECLS, or a declared function not exported):\n{out}")
            return 1
    print(f"{header}: compiles alone as C11 and C++17; {len(names)} declared functions link from C++ with C linkage")
    return 0


def check_exports(include_dir, lib):
    public = {}
    for h in headers(include_dir):
        for n in declared(h):
            public[n] = os.path.basename(h)
    code, out = run(["nm", "-D", "--defined-only", lib])
    if code:
        print(f"nm -D failed on {lib}:\n{out}")
        return 1
    exported = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 3:
            exported.add(fields[2].split("@")[0])
    extra = sorted(s for s in exported if s not in public)
    missing = sorted(n for n in public if n not in exported)
    for s in extra:
        why = "has no adj_ prefix" if not s.startswith("adj_") else "is not declared in any public header"
        print(f"exported symbol {s} {why}")
    for n in missing:
        print(f"{n} is declared in {public[n]} but not exported (declare it between ADJ_BEGIN_DECLS and ADJ_END_DECLS)")
    print(f"{os.path.basename(lib)}: {len(exported)} exported symbols, {len(public)} public functions declared, "
          f"{len(extra)} unexpected, {len(missing)} missing")
    return 1 if extra or missing or not exported else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "list":
        for h in headers(argv[2]):
            print(os.path.basename(h))
        return 0
    if len(argv) >= 4 and argv[1] == "exports":
        return check_exports(argv[2], argv[3])
    if len(argv) >= 6 and argv[1] == "header":
        parts = split_args(argv[5:])
        if len(parts) < 2 or not parts[0] or not parts[1]:
            print("header: give CC... -- CXX... [-- EXTRA_FLAGS...]")
            return 2
        extra = parts[2] if len(parts) > 2 else []
        return check_header(argv[2], argv[3], argv[4], parts[0], parts[1], extra)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
