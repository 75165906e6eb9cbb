#!/usr/bin/env python3
"""The crate's import graph: layer order and import circles.

    python3 .ci/imports.py check          # exit 1 on an upward import or a circle
    python3 .ci/imports.py layers         # the layer graph: who imports whom
    python3 .ci/imports.py graph DIR      # the graph of DIR's entries (e.g. src/scheduler)
    python3 .ci/imports.py selftest       # the check finds what it must, in made-up trees

The layers, bottom to top (docs/architecture.md#layers): a module may import
its own layer and the layers below it, never a sibling on its floor or a
layer above it.

Circles are looked for among the entries (files and folders) directly inside
each folder named in CIRCLE_FREE; a folder's own submodules may import each
other. Paths are read from `use` trees and from `crate::`/`super::`/`self::`
paths in code; comments and string literals are skipped. `super::` inside an
inline `mod name { … }` (unit tests) is read as the file's own module.
"""

import os
import re
import sys
from collections import defaultdict

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

# Bottom (0) to top. Modules on one floor are siblings: neither imports the
# other.
FLOORS = [
    {"util", "backoff"},
    {"mesos", "coordination"},
    {"executor"},
    {"scheduler"},
    {"web", "testbed", "ctl", "marathon"},
    {"app"},
    {"fuzzing"},
]
FLOOR = {name: i for i, floor in enumerate(FLOORS) for name in floor}

CIRCLE_FREE = ["scheduler", "web", "testbed"]

# Folders built as rooms (their direct children) under a top module: there
# the folder's own mod.rs is an entry too ("mod.rs"), so a room that imports
# an item of the top module (which imports every room) shows as a circle.
# The check at this level is then exactly "no circle between rooms".
ROOMS = ["testbed"]


def module_of(path):
    """`src/a/b.rs` -> ['a', 'b']; `src/a/mod.rs` -> ['a']; lib.rs -> []."""
    rel = os.path.relpath(path, SRC)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return rel


def is_dir_module(path):
    return os.path.basename(path) in ("mod.rs", "lib.rs", "main.rs")


def strip(text):
    """Removes comments, string and char literals (keeps line structure)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            i = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            m = re.match(r"'(\\.|[^\\'])'", text[i:])
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_use(tree):
    """`a::{b, c::{d as e}}` -> ['a::b', 'a::c::d']."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)
    results = []

    def walk(prefix, s):
        depth, start, parts = 0, 0, []
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:k])
                start = k + 1
        parts.append(s[start:])
        for part in parts:
            brace = part.find("{")
            if brace >= 0 and part.endswith("}"):
                walk(prefix + part[:brace], part[brace + 1:-1])
            elif part:
                results.append(prefix + part)

    walk("", tree)
    return results


def child_exists(module_dir, name):
    return os.path.isfile(os.path.join(module_dir, name + ".rs")) or os.path.isfile(
        os.path.join(module_dir, name, "mod.rs"))


def references(path):
    """Absolute module paths (lists of segments) that `path` refers to."""
    text = strip(open(path, encoding="utf-8").read())
    here = module_of(path)
    # Folder that holds this module's children.
    if is_dir_module(path):
        kids = os.path.dirname(path)
    else:
        kids = path[:-3]
    inline = re.search(r"^\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text, re.M)
    cut = inline.start() if inline else len(text)
    refs = []

    def resolve(p, nested):
        segs = [s for s in p.split("::") if s]
        if not segs:
            return None
        base = list(here)
        if nested:
            base = base + ["<inline>"]
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] in ("super", "self"):
            cur = list(base)
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    cur = cur[:-1]
                segs = segs[1:]
            cur = [s for s in cur if s != "<inline>"]
            return cur + segs
        if not nested and child_exists(kids, segs[0]):
            return here + segs
        return None

    for part_text, nested in ((text[:cut], False), (text[cut:], True)):
        for m in re.finditer(r"\buse\s+([^;]+);", part_text):
            for p in expand_use(m.group(1)):
                r = resolve(p, nested)
                if r is not None:
                    refs.append(r)
        for m in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", part_text):
            r = resolve(m.group(1), nested)
            if r is not None:
                refs.append(r)
    return here, refs


def rust_files():
    for root, _, files in os.walk(SRC):
        for f in sorted(files):
            if f.endswith(".rs"):
                yield os.path.join(root, f)


def layer_edges():
    edges = defaultdict(lambda: defaultdict(list))
    for path in rust_files():
        here, refs = references(path)
        if not here or here[0] == "bin":
            continue
        for r in refs:
            if r and r[0] != here[0] and r[0] in FLOOR:
                edges[here[0]][r[0]].append(os.path.relpath(path, os.path.join(SRC, "..")))
    return edges


def entry_edges(folder):
    """Edges between the entries of src/<folder>/ (by first segment below it)."""
    depth = len(folder.split("/"))
    prefix = folder.split("/")
    edges = defaultdict(lambda: defaultdict(list))
    top = folder in ROOMS
    for path in rust_files():
        here, refs = references(path)
        if here[:depth] != prefix or (len(here) <= depth and not top):
            continue
        src = here[depth] if len(here) > depth else "mod.rs"
        for r in refs:
            if r[:depth] != prefix or len(r) <= depth:
                continue
            # only entries that exist as files/folders of the folder; in a
            # folder of rooms, any other item is one of the top module's
            if child_exists(os.path.join(SRC, folder), r[depth]):
                dst = r[depth]
            elif top:
                dst = "mod.rs"
            else:
                continue
            if dst != src:
                edges[src][dst].append(os.path.relpath(path, os.path.join(SRC, "..")))
    return edges


def cycles(edges):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    nodes = set(edges) | {t for s in edges.values() for t in s}

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def print_graph(edges):
    for src in sorted(edges):
        targets = ", ".join(f"{t} ({len(edges[src][t])})" for t in sorted(edges[src]))
        print(f"  {src} -> {targets}")


def check():
    bad = 0
    for src, targets in sorted(layer_edges().items()):
        for dst, files in sorted(targets.items()):
            if FLOOR[dst] >= FLOOR[src]:
                kind = "a sibling" if FLOOR[dst] == FLOOR[src] else "a layer above"
                print(f"upward import: {src} imports {dst}, {kind}, in {', '.join(sorted(set(files)))}")
                bad += 1
    for folder in CIRCLE_FREE:
        for comp in cycles(entry_edges(folder)):
            print(f"import circle in src/{folder}/: {' -> '.join(comp)}")
            bad += 1
    if bad:
        print(f"{bad} problem(s); see docs/architecture.md#layers")
        return 1
    print("imports: layers one-way, no circles in " + ", ".join(f"src/{f}/" for f in CIRCLE_FREE))
    return 0


def selftest():
    """The check finds an upward import, a sibling import and a circle in a
    made-up tree, and passes a clean one."""
    import tempfile
    global SRC
    kept = SRC
    cases = {
        "clean": {"util/mod.rs": "", "mesos/mod.rs": "use crate::util::x;",
                  "scheduler/mod.rs": "mod a; mod b;", "scheduler/a.rs": "use super::b::Y;",
                  "scheduler/b.rs": "use crate::mesos::Z;"},
        "upward": {"util/mod.rs": "", "mesos/mod.rs": "fn f() { crate::web::page(); }",
                   "web/mod.rs": ""},
        "sibling": {"mesos/mod.rs": "use crate::{coordination::{url::Url}, util};",
                    "coordination/mod.rs": "", "util/mod.rs": ""},
        "circle": {"scheduler/mod.rs": "mod a; mod b;", "scheduler/a.rs": "use super::b::Y;",
                   "scheduler/b.rs": "// use super::a::X; in a comment does not count\nuse crate::scheduler::a::X;"},
    }
    failures = 0
    for name, files in cases.items():
        with tempfile.TemporaryDirectory() as root:
            for rel, text in files.items():
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            SRC = root
            with open(os.devnull, "w") as quiet:
                stdout, sys.stdout = sys.stdout, quiet
                try:
                    code = check()
                finally:
                    sys.stdout = stdout
            SRC = kept
        if (code == 0) != (name == "clean"):
            print(f"selftest: case {name!r} gave exit {code}")
            failures += 1
    print("imports selftest: " + ("failed" if failures else "ok"))
    return 1 if failures else 0


def main(argv):
    if len(argv) < 2 or argv[1] == "check":
        return check()
    if argv[1] == "selftest":
        return selftest()
    if argv[1] == "layers":
        print("layer -> layers it imports (files):")
        print_graph(layer_edges())
        return 0
    if argv[1] == "graph" and len(argv) == 3:
        folder = argv[2].removeprefix("src/").rstrip("/")
        edges = entry_edges(folder)
        print(f"src/{folder}/ entry -> entries it imports (files):")
        print_graph(edges)
        for comp in cycles(edges):
            print(f"circle: {' -> '.join(comp)}")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
