#!/usr/bin/python3
"""The modules of the tree and the arrows between them (docs/HACKING.md).

A module is a folder of lib/, daemon/ or client/ (daemon/ and client/agent
itself are the programs rdzvd and rdzv-agent). Its public headers are in
its include/ folder (client/common, client/agent, client/ctl and the
program folders keep theirs beside their sources); every other header of a
module is its own. An arrow M -> N is a quoted #include, in a file of M, of
a public header of N; the generated protobuf headers are the module
`proto`, buildconf.h is the build's.

    layers.py graph [ROOT]   print the arrows, and any circle
    layers.py check [ROOT]   compare them with each module's header
    layers.py build BUILD    compile against each module's include path

`check` holds every module's own word against its includes: the header
that says what a module is (its public header with the `Calls:` line,
main.c for a program, or the top comment of its meson.build for lib/base,
a set of small headers) carries, in its top comment,

    * Calls: lib/base, daemon/core.
    * Called by: daemon/rpc, daemon/http.

and both lines must list exactly the arrows out of and into the module.
It also fails on an include of another module's internal header, on a
header no module has, and on any circle. Exit status 0 only when all
holds; each problem is printed with the file and line that show it.

`build` holds the build to the same word: for each module it takes the
compiler command of one of its sources from BUILD/compile_commands.json
and compiles a one-line file that includes another module's public header
with that command. A header of a module it calls must compile; one of a
module it cannot reach (not called, even through the modules it calls)
must fail to: the build, not a reviewer, refuses a wrong include.
"""
import json
import shlex
import subprocess
import tempfile

import os
import re
import sys

ROOTS = ("lib", "daemon", "client")
PROTO_PREFIXES = ("rdzv/", "grpc/health/", "grpc/reflection/", "etcd/")
# Generated in the build folder: the build's configuration, the protobuf
# descriptors, the fork server's python source.
IGNORED = {"buildconf.h", "descriptors.h", "forksrv_py.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def modules(root):
    """Every module folder (relative, '/'-separated) under lib/, daemon/
    and client/: a folder that holds C sources or headers directly."""
    found = set()
    for top in ROOTS:
        for d, subdirs, files in os.walk(os.path.join(root, top)):
            subdirs[:] = sorted(s for s in subdirs
                                if s not in ("include", "page"))
            if any(f.endswith((".c", ".h")) for f in files):
                found.add(os.path.relpath(d, root).replace(os.sep, "/"))
    return sorted(found)


def files_of(root, mod):
    """(path, is_public) of each .c and .h of |mod|."""
    out = []
    d = os.path.join(root, mod)
    for f in sorted(os.listdir(d)):
        if f.endswith((".c", ".h")):
            out.append((f"{mod}/{f}", False))
    inc = os.path.join(d, "include")
    if os.path.isdir(inc):
        for f in sorted(os.listdir(inc)):
            if f.endswith(".h"):
                out.append((f"{mod}/include/{f}", True))
    return out


def header_table(root, mods):
    """name -> (module, public) for every header of the tree. A module
    without an include/ folder has only public headers."""
    table = {}
    for m in mods:
        has_inc = os.path.isdir(os.path.join(root, m, "include"))
        for path, public in files_of(root, m):
            if path.endswith(".h"):
                table[os.path.basename(path)] = (m, public or not has_inc)
    return table


def arrows(root, mods, problems):
    """{module: {callee: [(file, line), ...]}} from the quoted includes."""
    table = header_table(root, mods)
    out = {m: {} for m in mods}
    for m in mods:
        for path, _ in files_of(root, m):
            text = open(os.path.join(root, path), encoding="utf-8").read()
            for mt in INCLUDE.finditer(text):
                name = mt.group(1)
                line = text.count("\n", 0, mt.start()) + 1
                where = f"{path}:{line}"
                if name in IGNORED:
                    continue
                if name.startswith(PROTO_PREFIXES):
                    out[m].setdefault("proto", []).append(where)
                    continue
                if "/" in name:
                    problems.append(f"{where}: #include \"{name}\" names a "
                                    "path: include a module's header by "
                                    "its name")
                    continue
                if name not in table:
                    problems.append(f"{where}: #include \"{name}\": no "
                                    "module has this header")
                    continue
                owner, public = table[name]
                if owner == m:
                    continue
                if not public:
                    problems.append(f"{where}: #include \"{name}\" reaches "
                                    f"into {owner}'s internals")
                out[m].setdefault(owner, []).append(where)
    return out


def circles(graph):
    """Each circle of the graph once, as a list of modules."""
    found, seen = [], set()

    def walk(node, path):
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                cyc = path[path.index(nxt):]
                key = frozenset(cyc)
                if key not in seen:
                    seen.add(key)
                    found.append(cyc + [nxt])
            elif nxt in graph:
                walk(nxt, path + [nxt])
    for n in sorted(graph):
        walk(n, [n])
    return found


DECL = re.compile(r"^\s*[*#]\s*(Calls|Called by):\s*(.*)$")


def declared(root, mod):
    """(file, {'Calls': set, 'Called by': set}) from the module's header;
    file None when no header of it says."""
    cands = [p for p, public in files_of(root, mod)
             if p.endswith(".h") and (public or "/include/" not in p)]
    for extra in ("main.c", "meson.build"):
        if os.path.exists(os.path.join(root, mod, extra)):
            cands.append(f"{mod}/{extra}")
    for path in cands:
        lines = open(os.path.join(root, path), encoding="utf-8").read()
        if path.endswith("meson.build"):
            lines = lines.split("\n\n", 1)[0].splitlines()
        else:
            lines = lines.split("*/", 1)[0].splitlines()
        got = {}
        for i, line in enumerate(lines):
            mt = DECL.match(line)
            if not mt:
                continue
            text = mt.group(2)
            j = i + 1
            while not text.rstrip().endswith(".") and j < len(lines):
                text += " " + lines[j].strip().lstrip("*#").strip()
                j += 1
            text = text.strip().rstrip(".")
            names = set()
            if not text.startswith("none"):
                names = {n.strip() for n in text.split(",") if n.strip()}
            got[mt.group(1)] = names
        if got:
            return path, got
    return None, {}


def check(root):
    problems = []
    mods = modules(root)
    graph = arrows(root, mods, problems)
    callers = {m: set() for m in mods}
    for m, outs in graph.items():
        for n in outs:
            if n in callers:
                callers[n].add(m)
    for m in mods:
        path, got = declared(root, m)
        if path is None:
            problems.append(f"{m}: no header of it has the `Calls:` and "
                            "`Called by:` lines")
            continue
        for key, actual in (("Calls", set(graph[m])),
                            ("Called by", callers[m])):
            said = got.get(key)
            if said is None:
                problems.append(f"{path}: no `{key}:` line")
                continue
            for n in sorted(actual - said):
                where = (graph[m][n][0] if key == "Calls"
                         else graph[n][m][0])
                problems.append(f"{path}: `{key}:` omits {n} ({where})")
            for n in sorted(said - actual):
                problems.append(f"{path}: `{key}:` names {n}, but no "
                                "include says so")
    for cyc in circles({m: set(o) - {"proto"} for m, o in graph.items()}):
        problems.append("circle: " + " -> ".join(cyc))
    for p in problems:
        print(p)
    print(f"{len(mods)} modules, "
          f"{sum(len(o) for o in graph.values())} arrows, "
          f"{len(problems)} problems")
    return 1 if problems else 0


def show(root):
    problems = []
    mods = modules(root)
    graph = arrows(root, mods, problems)
    for m in mods:
        print(f"{m} -> {', '.join(sorted(graph[m])) or '(nothing)'}")
    cyc = circles({m: set(o) - {"proto"} for m, o in graph.items()})
    for c in cyc:
        print("circle: " + " -> ".join(c))
    print(f"{len(mods)} modules, {len(cyc)} circles")
    return 0


def main_header(root, mod):
    """The header another module includes to reach |mod|."""
    path, _ = declared(root, mod)
    if path is not None and path.endswith(".h"):
        return os.path.basename(path)
    has_inc = os.path.isdir(os.path.join(root, mod, "include"))
    pub = [p for p, public in files_of(root, mod) if p.endswith(".h") and
           (public or not has_inc)]
    return os.path.basename(pub[0]) if pub else None


def reach(graph, mod):
    """Every module |mod| calls, directly or through others."""
    seen, todo = set(), [mod]
    while todo:
        for n in graph.get(todo.pop(), ()):
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def command_for(build, root, mod):
    """The compiler command (argv, directory) of one product source of
    |mod|: a target of the module itself, not a test's or a fuzz
    target's, which see more."""
    entries = json.load(open(os.path.join(build, "compile_commands.json")))
    targets = {}
    for e in entries:
        f = os.path.normpath(os.path.join(e["directory"], e["file"]))
        if (os.path.dirname(f) == os.path.normpath(os.path.join(root, mod))
                and not e["output"].startswith(("tests/", "bench/"))):
            targets.setdefault(os.path.dirname(e["output"]), []).append(e)
    # The module's own target is the one with most of its sources (the
    # agent's folder also builds the small preload library masterwait.c).
    for group in sorted(targets.values(), key=len, reverse=True)[:1]:
        e = group[0]
        argv, out, skip = shlex.split(e["command"]), [], False
        for a in argv:
            if skip:
                skip = False
            elif a in ("-o", "-c", "-MQ", "-MF"):
                skip = True
            elif a not in ("-MD", e["file"]) and \
                    not a.startswith("-fdiagnostics-color"):
                out.append(a)
        return out, e["directory"]
    return None, None


def build_check(root, build):
    problems, tried = [], 0
    mods = modules(root)
    graph = {m: set(o) for m, o in arrows(root, mods, problems).items()}
    with tempfile.TemporaryDirectory() as tmp:
        for m in mods:
            argv, cwd = command_for(build, root, m)
            if argv is None:
                problems.append(f"{m}: no source of it in "
                                f"{build}/compile_commands.json")
                continue
            far = reach(graph, m)
            refused = []
            for n in mods:
                h = main_header(root, n)
                if n == m or h is None:
                    continue
                if n in graph[m]:
                    want = True
                elif n not in far:
                    want = False
                else:
                    continue        # reached through a callee: either way
                src = os.path.join(tmp, "probe.c")
                with open(src, "w") as f:
                    f.write(f'#include "{h}"\n')
                r = subprocess.run(argv + ["-fsyntax-only", "-c", src],
                                   cwd=cwd, capture_output=True, text=True)
                tried += 1
                ok = r.returncode == 0
                if ok != want:
                    problems.append(
                        f"{m} including {h} ({n}): "
                        + ("does not compile, though it calls it:\n"
                           + r.stderr.strip()[:500] if want else
                           "compiles, though it may not reach it"))
                elif not want and "No such file" not in r.stderr:
                    problems.append(f"{m} including {h} ({n}) failed for "
                                    "another reason than the include path:"
                                    "\n" + r.stderr.strip()[:500])
                elif not want:
                    refused.append(h)
            print(f"{m}: refuses {', '.join(refused) or 'nothing'}")
    for p in problems:
        print(p)
    print(f"{len(mods)} modules, {tried} includes tried, "
          f"{len(problems)} problems")
    return 1 if problems else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "build":
        root = os.environ.get("RDZV_SOURCE_ROOT", os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", ".."))
        return build_check(os.path.abspath(root), os.path.abspath(argv[2]))
    if len(argv) < 2 or argv[1] not in ("graph", "check"):
        print(__doc__.strip().split("\n\n")[2], file=sys.stderr)
        return 2
    root = argv[2] if len(argv) > 2 else os.environ.get(
        "RDZV_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..",
                                         ".."))
    return (check if argv[1] == "check" else show)(root)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
