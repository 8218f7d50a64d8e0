#!/usr/bin/env python3
"""Import circles between the files of crate `eddy` (docs/architecture.md, "Modules and layers").

A file imports another when it names a path into it: `crate::a::b::X`, `super::x::Y`, or a
path through a child module (`child::Z`), resolved to the longest prefix that is a module. Test
modules (`#[cfg(test)] mod tests { ... }` at the end of a file, `tests.rs`, `loom_models.rs`) and
comments do not count. The circles are the strongly connected components of that graph.

    python3 docs/tools/import_circles.py            # list the circles
    python3 docs/tools/import_circles.py -v         # and the edges inside each
    python3 docs/tools/import_circles.py --max 3    # exit 1 if one is longer (run by .ci/run)
"""

import argparse
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "crates", "eddy", "src")
NOT_MODULES = {"crate", "super", "self", "std", "core", "alloc"}


def module_path(rel):
    """`worker/mod.rs` -> ["worker"], `task/raw.rs` -> ["task", "raw"], `lib.rs` -> []."""
    parts = rel[:-3].split("/")
    if parts[-1] == "mod":
        parts = parts[:-1]
    return [] if parts == ["lib"] else parts


def strip(src):
    """The source without its trailing test module and without comments."""
    cut = src.find("#[cfg(test)]\nmod tests {")
    if cut >= 0:
        src = src[:cut]
    return re.sub(r"//[^\n]*", "", src)


def graph(root):
    files = {}
    for d, _, names in os.walk(root):
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(d, name)
                files[os.path.relpath(path, root)] = open(path, encoding="utf-8").read()
    modules = {tuple(module_path(rel)): rel for rel in files}

    def resolve(path):
        for k in range(len(path), 0, -1):
            if tuple(path[:k]) in modules:
                return modules[tuple(path[:k])]
        return None

    edges = {rel: set() for rel in files}
    for rel, src in files.items():
        if rel.endswith("tests.rs") or "loom_models" in rel:
            continue
        me = module_path(rel)
        parent = me[:-1]
        body = strip(src)
        targets = []
        for m in re.finditer(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)", body):
            rest = m.group(2).split("::")[1:]
            base = [] if m.group(1) == "crate" else list(parent)
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
            targets.append(base + rest)
        for m in re.finditer(r"use\s+(crate|super)::\{([^;]*)\};", body):
            base = [] if m.group(1) == "crate" else list(parent)
            for item in re.split(r",\s*", m.group(2)):
                parts = [p.strip("{} ") for p in item.strip().split("::") if p.strip("{} ")]
                targets.append(base + parts)
        for m in re.finditer(r"(?<![:\w])([a-z_][a-z0-9_]*)((?:::[A-Za-z_][A-Za-z0-9_]*)+)", body):
            head = m.group(1)
            if head not in NOT_MODULES and tuple(me + [head]) in modules:
                targets.append(me + [head] + m.group(2).split("::")[1:])
        for path in targets:
            target = resolve(path)
            if target and target != rel:
                edges[rel].add(target)
    return edges


def circles(edges):
    """Strongly connected components with more than one file (Tarjan)."""
    sys.setrecursionlimit(10000)
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found, key=len, reverse=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-v", action="store_true", help="print the edges inside each circle")
    p.add_argument("--max", type=int, help="fail if a circle has more files than this")
    args = p.parse_args()
    edges = graph(ROOT)
    found = circles(edges)
    for component in found:
        print(f"{len(component)} files: {' '.join(component)}")
        if args.v:
            for v in component:
                print(f"    {v} -> {' '.join(sorted(w for w in edges[v] if w in component))}")
    if not found:
        print("no import circles")
    if args.max is not None and found and len(found[0]) > args.max:
        print(f"import circle of {len(found[0])} files (at most {args.max} allowed)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
