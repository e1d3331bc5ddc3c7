#!/usr/bin/env python3
"""Folders are layers (DESIGN.md §2): a folder includes only from itself and from the
folders listed before it. This checks every quoted #include of the tree against that
order and exits 1 naming each include that reaches up.

    tests/layers.py [ROOT]            the check (ctest runs it as `layers`)
    tests/layers.py --report [ROOT]   the folder-to-folder include arrows, how many run up
                                      the order, and the folder pairs that include each
                                      other (cycles), for any checkout, old layouts too

Rules beyond the order, each with its reason:
  - client/ includes nothing from actors/: users link the client library without the
    runtime, and the client speaks only the message protocol (messages/).
  - actors/runtime/ includes nothing from the rest of actors/: the runtime knows no
    actor, so that any program can host its own actors on it.
  - an actor's folder under actors/ includes nothing from another actor's folder: actors
    meet through messages and the shared modules at actors/ itself.
tools/ and tests/ may include anything; bench/, docs/ and examples/ hold no code that
the build compiles.
"""
import os
import re
import sys

LAYERS = ["base", "plan", "messages", "kernels", "collectives", "model", "actors", "client"]
FREE = ["tools", "tests"]  # may include anything
SOURCE = re.compile(r"\.(c|h|cu|cuh|def)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# Exceptions to the rules, each (file, included header): none today. Add one only with a
# comment saying why the layering cannot hold there.
ALLOWED = set()


def unit(path):
    """The folder an arrow starts or ends at: top-level folders, and actors/ split into
    its subfolders (actors/ itself for the files directly in it)."""
    parts = path.split("/")
    if parts[0] == "actors" and len(parts) > 2:
        return "actors/" + parts[1]
    return parts[0]


def includes(root):
    """(file, included path) for every quoted include that names a folder of the tree."""
    top = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        first = rel_dir.split("/")[0]
        if rel_dir != "." and (first.startswith(".") or first.startswith("build")):
            dirnames[:] = []
            continue
        for name in filenames:
            if not SOURCE.search(name):
                continue
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if "/" not in rel:
                continue  # (no code at the top)
            with open(os.path.join(dirpath, name), errors="replace") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                if "/" in inc and inc.split("/")[0] in top:
                    yield rel, inc


def violations(root):
    out = []
    for src, inc in includes(root):
        s, d = unit(src), unit(inc)
        s_top, d_top = s.split("/")[0], d.split("/")[0]
        why = None
        if s_top in FREE or s_top not in LAYERS or (src, inc) in ALLOWED:
            continue
        if d_top not in LAYERS:
            why = "%s/ is not a layer of the library" % d_top
        elif LAYERS.index(d_top) > LAYERS.index(s_top):
            why = "%s/ is a layer above %s/" % (d_top, s_top)
        elif s_top == "client" and d_top == "actors":
            why = "the client library stands without the runtime"
        elif s == "actors/runtime" and d_top == "actors" and d != s:
            why = "the runtime knows no actor"
        elif (s.startswith("actors/") and d.startswith("actors/") and s != d
              and d != "actors/runtime"):
            why = "actors meet through messages, not each other's headers"
        if why:
            out.append("%s includes \"%s\": %s" % (src, inc, why))
    return sorted(out)


def report(root):
    arrows = {}
    for src, inc in includes(root):
        s, d = unit(src), unit(inc)
        if s != d and s.split("/")[0] not in FREE:
            arrows[(s, d)] = arrows.get((s, d), 0) + 1

    def rank(u):
        t = u.split("/")[0]
        return LAYERS.index(t) if t in LAYERS else None

    up = [(s, d) for (s, d) in arrows
          if rank(s) is not None and rank(d) is not None and rank(d) > rank(s)]
    cycles = sorted({tuple(sorted((s, d))) for (s, d) in arrows if (d, s) in arrows})
    top = {}
    for (s, d), n in arrows.items():
        st, dt = s.split("/")[0], d.split("/")[0]
        if st != dt:
            top[(st, dt)] = top.get((st, dt), 0) + n
    top_cycles = sorted({tuple(sorted(p)) for p in top if (p[1], p[0]) in top})
    print("include arrows between folders (tools/ and tests/ left out), lines per arrow:")
    for (s, d), n in sorted(arrows.items()):
        mark = "  UP" if (s, d) in up else ""
        print("  %-22s -> %-22s %3d%s" % (s, d, n, mark))
    print("arrows: %d, running up the layer order (%s): %d"
          % (len(arrows), " ".join(LAYERS), len(up)))
    print("folder pairs that include each other: %d %s"
          % (len(cycles), " ".join("%s<->%s" % c for c in cycles)))
    print("top-level folder pairs that include each other: %d %s"
          % (len(top_cycles), " ".join("%s<->%s" % c for c in top_cycles)))
    return 0


def main(argv):
    args = [a for a in argv[1:] if a != "--report"]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if "--report" in argv:
        return report(root)
    bad = violations(root)
    for v in bad:
        print("layers: " + v, file=sys.stderr)
    if bad:
        print("layers: %d include(s) break DESIGN.md §2 (folders are layers)" % len(bad),
              file=sys.stderr)
        return 1
    print("layers: every include follows the layer order (%s)" % " ".join(LAYERS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
