#!/usr/bin/env python3
"""Import cycles among the library's files (src/, without main.rs), and shared modules (runtime,
journal, metrics, machine) importing a kind or the wiring: prints each and exits 1.

A file imports another when a `use` or a `crate::`/`super::`/`self::` path names an item of the
other file's module. Declaring a submodule (`mod x;`) is not an import. Run by hack/test.sh, so the
one-way layering (app → kinds → runtime → journal/metrics/machine) cannot quietly regress.
"""
import pathlib
import re
import sys

src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent / "src").resolve()


def module_of(path):
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("lib", "mod"):
        parts = parts[:-1]
    return tuple(parts)


def strip(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(\\.|[^"\\])*"', '""', text)


def use_paths(tree, prefix=()):
    """Expands a use tree (`a::{b, c::{d}}`) into paths."""
    tree = tree.strip()
    if not tree:
        return []
    if tree.endswith("}") and "{" in tree:
        head, inner = tree.split("{", 1)
        head = tuple(s for s in head.split("::") if s.strip())
        inner = inner[:-1]
        items, depth, cur = [], 0, ""
        for ch in inner:
            if ch == "," and depth == 0:
                items.append(cur)
                cur = ""
                continue
            depth += (ch == "{") - (ch == "}")
            cur += ch
        items.append(cur)
        return [p for item in items for p in use_paths(item, prefix + tuple(h.strip() for h in head))]
    path = tree.split(" as ")[0]
    return [prefix + tuple(s.strip() for s in path.split("::"))]


modules = {}
for path in src.rglob("*.rs"):
    if path.name != "main.rs":
        modules[module_of(path)] = path

edges = {m: set() for m in modules}
for module, path in modules.items():
    text = strip(path.read_text())
    paths = []
    for tree in re.findall(r"\buse\s+([^;]+);", text):
        paths += use_paths(tree)
    paths += [tuple(p.split("::")) for p in re.findall(r"\b(?:crate|super|self)(?:::\w+)+", text)]
    for p in paths:
        if p[0] == "crate":
            base, rest = (), p[1:]
        elif p[0] in ("super", "self"):
            base, rest = module, p
            while rest and rest[0] in ("super", "self"):
                if rest[0] == "super":
                    base = base[:-1]
                rest = rest[1:]
        else:
            continue
        target = base
        for seg in rest:
            if target + (seg,) in modules:
                target = target + (seg,)
            else:
                break
        if target != module and target in modules and target != module[: len(target)]:
            edges[module].add(target)
        elif target != module and target in modules and rest and target + (rest[0],) not in modules:
            # an item of an ancestor module (e.g. `super::Eru` from eru::reconcile)
            edges[module].add(target)

# layers: the shared modules import no kind and none of the wiring
shared = {"runtime", "journal", "metrics", "machine", "error", "conditions"}
upper = {"app", "config", "http", "history", "crds", "eru", "podset", "memcached"}
violations = [
    (m, t) for m in modules for t in edges[m] if m and t and m[0] in shared and t[0] in upper
]
for m, t in sorted(violations):
    print(f"layering: {modules[m].relative_to(src.parent)} (shared) imports {modules[t].relative_to(src.parent)}")

# cycles: strongly connected components with more than one file
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]


def connect(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges[v]:
        if w not in index:
            connect(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        scc = []
        while True:
            w = stack.pop()
            on.discard(w)
            scc.append(w)
            if w == v:
                break
        if len(scc) > 1:
            sccs.append(scc)


sys.setrecursionlimit(10000)
for v in modules:
    if v not in index:
        connect(v)
name = lambda m: str(modules[m].relative_to(src.parent))
for scc in sccs:
    print("import cycle:", ", ".join(sorted(name(m) for m in scc)))
    for m in sorted(scc):
        print(f"  {name(m)} -> " + ", ".join(sorted(name(t) for t in edges[m] if t in scc)))
if sccs or violations:
    sys.exit(1)
print(f"no import cycles among {len(modules)} files; shared modules import no kind")
